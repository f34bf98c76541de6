"""Write the configuration reference, generated from the schema, to docs/reference/config.md.

    python scripts/config_reference.py           # (re)write the page
    python scripts/config_reference.py --check   # exit 1 when the page is not the generated one"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "config.md"


def main(argv: list[str] | None = None) -> int:
    from cscore.cli.config_reference import config_reference_markdown

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 when the page is stale")
    ap.add_argument("--out", type=Path, default=PAGE, help=f"the page (default {PAGE})")
    args = ap.parse_args(argv)
    text = config_reference_markdown()
    if args.check:
        same = args.out.is_file() and args.out.read_text() == text
        print(f"{args.out}: {'up to date' if same else 'stale: run python scripts/config_reference.py'}")
        return 0 if same else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
