"""`ddpfsdp numbers`: the figures interviews expect, each with its source."""

from __future__ import annotations

import json

import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the page as JSON: each section's cells, figures and sources.")
def numbers(as_json: bool) -> None:
    """Bytes per parameter, model state per strategy, GPUs and links, ring collective costs, pipeline
    bubbles and MFU: each figure with its source (a datasheet, a paper, torch's code).

    Where `ddpfsdp calc` computes a figure, this page computes it with the same code, so they agree.
    The app shows the same page (n on the home screen).
    """
    from ddpfsdp.quiz import numbers as page

    if as_json:
        click.echo(json.dumps(page.to_dict(), indent=2))
        return
    from ddpfsdp.quiz.plain_console import plain_console

    plain_console().print(page.render())
