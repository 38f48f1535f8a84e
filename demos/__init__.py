"""Real DDP and FSDP training, concept demos, measurement and the analytic model.

Importing this package is cheap: modules that need torch import it themselves.
"""
