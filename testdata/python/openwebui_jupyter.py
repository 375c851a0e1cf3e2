"""Open WebUI's own Jupyter code executor, run as Open WebUI runs it.

Open WebUI's "jupyter" code-interpreter engine calls
open_webui.utils.code_interpreter.execute_code_jupyter with its settings:
the server's URL, the token when the auth setting is "token", else None,
the password when it is "password", else None, and the timeout. This
script makes that call with the code on stdin and prints the dict it
returns as one JSON object, for the Go tests (internal/cli) to check.

Open WebUI is installed with --no-deps (its full dependency set is a web
application's), so two of its imports are stood in for: the open_webui
package itself, whose __init__ starts its command line (typer, uvicorn), is
a bare package over the installed directory, and open_webui.env, which
reads and checks the whole app's settings, is a module with the two
settings code_interpreter.py and json_codec.py read, computed from the
environment as env.py computes them. Everything else is Open WebUI's code.

usage: openwebui_jupyter.py URL token|password SECRET TIMEOUT < code.py
"""

import asyncio
import importlib.util
import json
import os
import sys
import types


def stand_in_for_open_webui():
    spec = importlib.util.find_spec("open_webui")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("open_webui is not installed")
    package = types.ModuleType("open_webui")
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules["open_webui"] = package
    env = types.ModuleType("open_webui.env")
    # As open_webui/env.py computes them.
    env.AIOHTTP_CLIENT_ALLOW_REDIRECTS = os.getenv("AIOHTTP_CLIENT_ALLOW_REDIRECTS", "False").lower() == "true"
    env.ENABLE_ORJSON = os.getenv("ENABLE_ORJSON", "True").lower() == "true"
    sys.modules["open_webui.env"] = env
    package.env = env


def main():
    url, auth, secret, timeout = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    stand_in_for_open_webui()
    from open_webui.utils.code_interpreter import execute_code_jupyter

    code = sys.stdin.read()
    # As open_webui/utils/middleware.py and tools/builtin.py call it.
    output = asyncio.run(
        execute_code_jupyter(
            url,
            code,
            secret if auth == "token" else None,
            secret if auth == "password" else None,
            timeout,
        )
    )
    json.dump(output, sys.stdout)
    print()


if __name__ == "__main__":
    main()
