"""Is a finished epoch healthy? A run that collapsed or diverges without producing a NaN, told from its losses.

A network whose learning rate is too high for it can fall back to predicting the class prior: every output the same,
the cross-entropy at ln(classes) (2.30 for ten classes), the accuracy at chance, and no NaN anywhere, so the NaN
rollback never sees it (LeNet-5 on MNIST at batch 16, lr 0.05: 77.6 % after epoch 1, 10 % from epoch 2 on). Or the
loss grows far above its best without overflowing. Both are judged at an epoch's end from the epoch's mean training
loss against the best earlier epoch (the test set is not looked at: the verdict must not depend on it):

    back at chance   loss >= CHANCE_FRACTION * ln(classes), after an epoch at <= LEARNED_FRACTION * ln(classes)
    diverged         loss > best + DIVERGED_MARGIN * ln(classes) and loss > DIVERGED_RATIO * best

The first epoch has nothing to compare with and is never judged. A run that never learns is not a collapse, but it is
no result either: at the end of training `final_verdict` fails a run whose last epoch's loss is still at chance level
and whose test accuracy is too (at most CHANCE_ACCURACY_FACTOR / classes, 0.15 for ten classes), so that it reads
FAILED in the dashboard with the reason, not FINISHED like a run that learned.
Thresholds are wide on purpose: a healthy run's epoch loss moves by a few hundredths from one epoch to the next;
these fire only on a change of the whole run's state.
"""
from __future__ import annotations

import math
from typing import Iterable

CHANCE_FRACTION = 0.9    # 2.07 for 10 classes: within 10 % of the loss of a uniform prediction
LEARNED_FRACTION = 0.7   # 1.61 for 10 classes: the run had clearly learned something
DIVERGED_MARGIN = 0.25   # 0.58 for 10 classes above the best epoch ...
DIVERGED_RATIO = 2.0     # ... and at least twice the best
CHANCE_ACCURACY_FACTOR = 1.5   # a final test accuracy up to 1.5x that of guessing is chance level


def verdict(loss: float, earlier_losses: Iterable[float], num_classes: int) -> str | None:
    """None for a healthy epoch, else why it is not (a sentence with the numbers)."""
    earlier = [float(x) for x in earlier_losses if math.isfinite(float(x))]
    if not earlier or not math.isfinite(loss):
        return None
    chance = math.log(num_classes)
    best = min(earlier)
    if loss >= CHANCE_FRACTION * chance and best <= LEARNED_FRACTION * chance:
        return (f"training loss {loss:.4f} is back at chance level (ln {num_classes} = {chance:.4f}) after "
                f"{best:.4f} in an earlier epoch: the run collapsed")
    if loss > best + DIVERGED_MARGIN * chance and loss > DIVERGED_RATIO * best:
        return f"training loss {loss:.4f} is far above its best earlier epoch ({best:.4f}): the run diverges"
    return None


def final_verdict(test_accuracy: float, last_loss: float, num_classes: int) -> str | None:
    """None for a run that learned something, else why it did not (a sentence with the numbers)."""
    chance_loss, chance_accuracy = math.log(num_classes), 1.0 / num_classes
    if test_accuracy <= CHANCE_ACCURACY_FACTOR * chance_accuracy and last_loss >= CHANCE_FRACTION * chance_loss:
        return (f"the run learned nothing: final test accuracy {test_accuracy:.4f} is at chance level (1/{num_classes}"
                f" = {chance_accuracy:.4f}) and the last epoch's training loss {last_loss:.4f} is at ln {num_classes} "
                f"= {chance_loss:.4f}")
    return None
