"""The 1F1B pipeline order.

A pipeline of `num_stages` stages runs `num_microbatches` micro-batches through each stage forward, then
back. Return the actions stage `stage` runs, in the order torch's Schedule1F1B runs them: "F3" is the
forward of micro-batch 3, "B3" its backward. For example stage 0 of 3 with 4 micro-batches runs
["F0", "F1", "F2", "B0", "F3", "B1", "B2", "B3"].

1F1B ("one forward, one backward") starts backwards as early as it can, so a stage holds few micro-batches'
activations at once: that is its point against GPipe, which runs every forward before any backward.

Using Schedule1F1B is refused: it is the answer. The checker compares your order with torch's for every
stage of several pipelines (torch refuses fewer micro-batches than stages), then simulates the whole
pipeline with your orders, one time unit per action: it must not deadlock, it must idle (p-1)/(m+p-1) of the
time, and stage s must never hold more than min(m, p - s) micro-batches in flight.

    ddpfsdp kata check one-f-one-b          ddpfsdp kata hint one-f-one-b
"""


def one_f_one_b(stage, num_stages, num_microbatches):
    raise NotImplementedError("this stage's actions, e.g. ['F0', 'F1', 'B0', ...]")
