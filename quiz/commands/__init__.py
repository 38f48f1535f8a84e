"""One module per command of the `ddpfsdp` group; each imports only click at module level."""
