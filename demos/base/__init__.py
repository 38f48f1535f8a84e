"""The ground floor: what every stage may use and that uses nothing of the demos.

    shapes       model shapes and their parameter counts (torch-free)
    units        byte and count parsing and formatting
    collectives  the collectives and their ring wire factor
    host         cores and RAM
    labels       table labels that wrap at word boundaries (rich only)
    bounds       click types for finite, bounded numbers on a command line

Nothing here imports torch or any other room of the demos.
"""
