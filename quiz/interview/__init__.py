"""The design interview: a seeded scenario taken step by step, every answer from the analytic model.

`scenario` holds the types (the job's setup, a step, a scenario), `steps` and `followups` build the
steps an interviewer asks in order, `generate` draws a scenario from a seed and the presets,
`answers` reads and grades what a person types, `debrief` scores the skills and names the
simulated run that measures the same configuration, and `plain` runs it line by line.

No torch or textual here: the CLI, plain mode and the app import it.
"""
