"""The prover's engine library: what more than one room uses (the rooms: `perflab.prover`'s map).

    kg          KnowledgeGraph: facts, rules, queries; the facts/rules text format
    engine      UnificationEngine: every successor of a batch of proof states, fixed shapes
    step        GreedyStep: one policy-guided step, compiled, its slots in place
    policy      the policy network and its REINFORCE training
    rollout     the rollout loops (full, masked, compact, bucketed, recycle) and their results
    batching    the measured memory model: how many candidates fit in a step
    reference   the reference prover (plain-Python SLD resolution) and exhaustive provability: the oracle
    ranking     corruptions, ranks under each tie rule, MRR and Hits@k (the ranking protocol)
    data        seeded synthetic graphs: the family graph, the ladder, random graphs and states
    datasets    the real graphs (benchmarks/: Kinship, Nations, UMLS, vendored) and what `kg` names
    mining      closed-path rules mined from a graph's facts, and their brute-force oracle
    params      ProverParams: the fields the prover notebooks share
    prepared    prepare(run): the graph, its engine and a policy trained for a few seconds
"""
