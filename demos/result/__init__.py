"""The result contract: what every demo hands back, typed, and the checks it carries.

    schema       the result (schema ddpfsdp.demo/1): one typed value and its JSON form
    checks       the named-check type, with its verdicts and numbers
    step_record  one rank's recorded step, typed
    expert_record  an MoE run's routing and reference, typed

It sits on the ground floor with `base`: theory, training, measurement, the launch and the quiz all read
it. No torch, and nothing of the demos above it.
"""
