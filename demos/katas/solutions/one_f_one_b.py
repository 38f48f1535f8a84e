"""The 1F1B order of one stage, as torch's Schedule1F1B runs it.

Stage s first runs min(m, p - s) forwards: the first stage fills the pipeline, the last runs one. Then it
alternates one backward and one forward until every forward has run, and finishes with the backwards left.
So stage s holds at most p - s micro-batches' activations, where GPipe (all forwards, then all backwards)
holds all m; the bubble is the same (p-1)/(m+p-1) of the step when each action takes one unit.
"""


def one_f_one_b(stage, num_stages, num_microbatches):
    warmup = min(num_microbatches, num_stages - stage)
    actions = [f"F{i}" for i in range(warmup)]
    forward, backward = warmup, 0
    while backward < num_microbatches:
        actions.append(f"B{backward}")
        backward += 1
        if forward < num_microbatches:
            actions.append(f"F{forward}")
            forward += 1
    return actions
