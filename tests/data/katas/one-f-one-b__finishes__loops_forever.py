"""Planted: a warm-up loop whose counter never moves on the last stage."""


def one_f_one_b(stage, num_stages, num_microbatches):
    actions, forward = [], 0
    while forward < min(num_microbatches, num_stages - stage):
        actions.append(f"F{forward}")
        if stage != num_stages - 1:
            forward += 1
    return actions
