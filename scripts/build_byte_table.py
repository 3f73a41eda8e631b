"""Write f8roof/traffic/data/byte_polynomials.json: the worst and ideal byte models of the
named recipes as polynomials (`f8roof.traffic.byte_table`), so that an estimate needs no sympy.
Rebuild after a change to `traffic/worst_ideal.py`, `block_scaled.py` or `grouped.py`;
`tests/test_byte_table.py` fails until then.

    PYTHONPATH=. python scripts/build_byte_table.py
"""

import json
from importlib import resources
from pathlib import Path

from f8roof.files import write_text_atomic
from f8roof.traffic.byte_table import TABLE_FILE, build_table


def main() -> None:
    path = Path(str(resources.files("f8roof.traffic").joinpath("data", TABLE_FILE)))
    table = build_table()
    models = ",\n".join(
        f"  {json.dumps(key)}: {json.dumps(model, sort_keys=True)}"
        for key, model in sorted(table["models"].items())
    )
    text = f'{{"version": {table["version"]}, "models": {{\n{models}\n}}}}\n'  # a model a line
    write_text_atomic(path, text)
    print(f"{path}: {len(table['models'])} models")


if __name__ == "__main__":
    main()
