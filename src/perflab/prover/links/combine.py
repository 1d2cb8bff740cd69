"""One score for every candidate: the embedding's log-probability, plus what a proof adds, weighed as the
valid split says.

    feats = features(emb_log_prob, search_result_as_[Q, C])       # [Q, C, 4]
    comb = fit([(cs.mask, feats_valid_head), (cs.mask, feats_valid_tail)])
    scores = comb(feats_test)                                      # [Q, C]

score(c) = a * log p_emb(c) + proved(c) * (b + c_w * sum of log rule weights of its proof
                                              + c_p * sum of the policy's log-probabilities of its proof)

Every candidate has the embedding term, so an unproved positive no longer ties with every failed corruption
(the symbolic prover alone gives them all fail_score). A proof adds a bonus: with equal embedding scores a
proved candidate ranks above an unproved one exactly when its bonus is positive, and among proved ones a
proof through more confident rules (or choices the policy likes more) ranks higher when c_w (c_p) > 0.

Why this form. NTPλ trains NTP and ComplEx on one loss with shared embeddings, and its code can score a
triple at test time by the larger of the two success probabilities (`test_time_neural_link_prediction`,
off in the Kinship/Nations/UMLS configs). A max of a proof's probability (the product of its rules'
confidences) and the embedding's softmax probability assumes both are calibrated on one scale; they are
not: mined rules of confidence 0.1-0.5 prove many corruptions, and the max ranks them above positives the
embedding is sure of (`predict.max_scores` is that rule; 03 prints it beside the fit). So the weights
(a, b, c_w, c_p) are learned: the listwise softmax loss of each positive against its own filtered
corruptions (convex: L-BFGS in float64, deterministic), on the valid split, never on test. The embedding
alone (b = c_w = c_p = 0) is one point of the family, so the fit cannot do worse on its own loss.
"""
from __future__ import annotations

import dataclasses

import torch

FEATURES = ("embedding log-prob", "proved", "rule log-weight", "policy log-prob")


def features(emb_log_prob: torch.Tensor, proven: torch.Tensor, log_weight: torch.Tensor,
             policy_log_prob: torch.Tensor) -> torch.Tensor:
    """[Q, C] each -> [Q, C, 4] in FEATURES order (the proof's terms are 0 where nothing was proved)."""
    p = proven.to(emb_log_prob.dtype)
    return torch.stack([emb_log_prob, p, log_weight * p, policy_log_prob * p], -1)


@dataclasses.dataclass
class Combination:
    weights: torch.Tensor       # [4] in FEATURES order
    loss: float = float("nan")  # mean listwise loss per positive on the data it was fitted on

    def __call__(self, feats: torch.Tensor) -> torch.Tensor:
        """[Q, C, 4] -> [Q, C] scores (float64: the ranks round them to 4 decimals)."""
        return feats.double() @ self.weights.double()

    def bonus(self, log_weight: float = 0.0, policy_log_prob: float = 0.0) -> float:
        """What a proof with these sums adds to a candidate's score."""
        w = self.weights.tolist()
        return w[1] + w[2] * log_weight + w[3] * policy_log_prob

    def describe(self) -> str:
        return ", ".join(f"{n} {w:+.3f}" for n, w in zip(FEATURES, self.weights.tolist()))


EMBEDDING_ONLY = Combination(torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64))


def listwise_loss(weights: torch.Tensor, lists) -> torch.Tensor:
    """Mean over positives of -log softmax(score)[positive] among its real candidates; lists: [(mask [Q, C],
    feats [Q, C, 4])], the positive at column 0."""
    total, n = 0.0, 0
    for mask, feats in lists:
        s = (feats.double() @ weights).masked_fill(~mask, float("-inf"))
        total = total - torch.log_softmax(s, -1)[:, 0].sum()
        n += len(mask)
    return total / max(1, n)


def fit(lists, l2: float = 1e-3, max_iter: int = 100) -> Combination:
    """The weights minimizing the listwise loss plus l2 * |w|^2 (the penalty keeps them finite when the valid
    lists are separable), from the embedding alone; L-BFGS in float64, so the fit is deterministic."""
    w = EMBEDDING_ONLY.weights.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([w], lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = listwise_loss(w, lists) + l2 * (w ** 2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    w = w.detach()
    return Combination(w, float(listwise_loss(w, lists)))
