"""Run every command and code block of the documentation as written, and check the marks.

The documents are README.md, examples/README.md, every Markdown file under docs/ (the
site's pages, MyST Markdown) and every Markdown file those pages include with MyST's
``include`` directive (benchmarks/README.md, CHANGELOG.md). Each fenced block is run
unless a mark, an HTML comment on the line right before its opening fence, says
otherwise and why::

    <!-- doc-block: KIND [OPTION=VALUE ...] — REASON -->

The reason (after an em dash, or ``--``) is required. The kinds:

``setup``
    The README's install: run first, as written, in a fresh copy of the checkout; the
    ``.venv`` it creates is where every other block runs (one README block only).
``ci``
    The README's test command: ``.ci/run`` runs it as its first step (``command ci``
    prints it), so it is not run here (one README block only).
``run``
    Run it (what an unmarked block gets); for options only: ``extras=a,b`` runs it
    after ``pip install -e '.[a,b]'`` (a shell block must contain that install
    itself), ``timeout=SECONDS``.
``server``
    Shell commands that start servers (``port=N`` required, ``extras`` and ``timeout``
    allowed): each command with ``--port N`` is started, ``127.0.0.1:N`` is waited
    for, the ``client`` block that follows is run against it, then the server gets
    SIGTERM and must exit 0. Other commands in the block (installs) run in order.
``client``
    Requests to the servers of the ``server`` block right before it.
``skip``
    Cannot run here (say why: needs CANN, say); checked for syntax only.
``fragment``
    Part of a program, not one; checked for syntax only (Python may ``await`` at the
    top level).
``text``
    Not code (a usage synopsis, a file's content); a ``json`` block must parse.

An unmarked block must be ``python`` (run with the virtualenv's Python) or a shell
language (``bash``, ``sh``, ``shell``, ``console``: run with ``bash -euo pipefail``); any
other unmarked block, a malformed mark, a mark without a reason or one that names no
block is an error. Blocks run from the root of the copy, one fresh copy and virtualenv
per distinct set of extras.

The site's MyST directives (tabs, toctrees, includes) take colon fences
(``:::{tab-item} trio``), whose content is Markdown like the rest, so the code blocks
inside them are found and run; a backtick fence that opens a directive
(```` ```{toctree} ````) is an error, since code inside it would be neither. The API
reference's reStructuredText pages (docs/**/*.rst) hold autodoc directives only: a code
block or literal block there is an error (put runnable code in a Markdown page).

Usage (python3 from the standard library alone, from the repository root)::

    python3 .ci/doc_blocks.py check          # the marks, and syntax: no virtualenv, fast
    python3 .ci/doc_blocks.py run            # check, then run every block
    python3 .ci/doc_blocks.py command ci     # print the README's test command
    python3 .ci/doc_blocks.py copy DEST      # copy the checkout (as git sees it) to DEST
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

KINDS = ("setup", "ci", "run", "server", "client", "skip", "fragment", "text")
#: The options each kind takes (``port`` is required for ``server``).
OPTIONS = {
    "run": {"extras", "timeout"},
    "server": {"port", "extras", "timeout"},
    "setup": {"timeout"},
}
PYTHON = ("python", "py")
SHELL = ("bash", "sh", "shell", "console")
DEFAULT_TIMEOUT_S = 120.0
SERVER_START_S = 30.0
SERVER_EXIT_S = 20.0

MARK = re.compile(
    r"^<!-- doc-block: (?P<kind>[a-z]+)(?P<options>(?: [a-z]+=\S+)*)"
    r"(?: (?:—|--) (?P<reason>.*?))? -->$"
)
FENCE = re.compile(r"^```(?P<info>[^`\s]*)")


class DocBlockError(Exception):
    """A block or mark that breaks the rules above; the message says where."""


@dataclasses.dataclass
class Block:
    """One fenced block: where it is, its language and text, and its mark."""

    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    kind: str = "run"
    options: dict[str, str] = dataclasses.field(default_factory=dict)
    reason: str = ""
    marked: bool = False

    @property
    def where(self) -> str:
        return f"{_shown(self.path)}:{self.line}"

    @property
    def extras(self) -> tuple[str, ...]:
        value = self.options.get("extras", "")
        return tuple(sorted(filter(None, value.split(","))))

    @property
    def timeout(self) -> float:
        return float(self.options.get("timeout", DEFAULT_TIMEOUT_S))

    @property
    def commands(self) -> list[str]:
        """The shell block's commands, one per line (comment lines dropped)."""
        lines = [line.strip() for line in self.text.splitlines()]
        return [line for line in lines if line and not line.startswith("#")]


def _shown(path: Path) -> str:
    """*path* as messages name it: relative to the checkout where it is in it."""
    try:
        return str(path.relative_to(ROOT))
    except ValueError:  # a document elsewhere (the checker's own tests)
        return path.name


#: MyST's include directive (in a colon fence), and the file it names.
INCLUDE = re.compile(r"^:{3,}\{include\}\s+(?P<path>\S+)\s*$")
#: A reStructuredText code directive.
RST_CODE = re.compile(r"^\s*\.\. (?:code-block|code|sourcecode)::")


def documents(root: Path = ROOT) -> list[Path]:
    """The Markdown files whose blocks must run: README.md, examples/, docs/ (nested),
    and the Markdown files that pages of docs/ include."""
    found = [root / "README.md", root / "examples" / "README.md"]
    pages = sorted((root / "docs").rglob("*.md"))
    found += pages
    for page in pages:
        for line in page.read_text(encoding="utf-8").splitlines():
            match = INCLUDE.match(line)
            if match and match["path"].endswith(".md"):
                found.append((page.parent / match["path"]).resolve())
    unique = list(dict.fromkeys(path.resolve() if path.is_file() else path for path in found))
    return [path for path in unique if path.is_file()]


def check_rst(root: Path = ROOT) -> None:
    """Raise ``DocBlockError`` if a reStructuredText page of docs/ holds a block of code."""
    for path in sorted((root / "docs").rglob("*.rst")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            stripped = line.strip()
            literal = stripped.endswith("::") and not stripped.startswith("..")
            if RST_CODE.match(line) or literal:  # a code directive, or a literal block
                raise DocBlockError(
                    f"{_shown(path)}:{number}: a block of code in a reStructuredText page, "
                    "which nothing runs: put runnable code in a Markdown page"
                )


def parse(path: Path) -> list[Block]:
    """Every fenced block of *path*, with its mark; raise on a misplaced mark."""
    lines = path.read_text(encoding="utf-8").splitlines()
    name = _shown(path)
    blocks: list[Block] = []
    pending: tuple[int, re.Match[str]] | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("<!-- doc-block"):
            found = MARK.match(line.strip())
            if found is None:
                raise DocBlockError(f"{name}:{index + 1}: malformed mark: {line!r}")
            if pending is not None:
                raise DocBlockError(f"{name}:{pending[0] + 1}: a mark with no block")
            pending = (index, found)
        elif (fence := FENCE.match(line)) is not None:
            if fence["info"].startswith("{"):
                raise DocBlockError(
                    f"{name}:{index + 1}: a MyST directive in a backtick fence: write it "
                    f"with a colon fence (:::{fence['info']}), so that blocks in it are run"
                )
            start = index
            index += 1
            body: list[str] = []
            while index < len(lines) and not lines[index].startswith("```"):
                body.append(lines[index])
                index += 1
            if index == len(lines):
                raise DocBlockError(f"{name}:{start + 1}: unclosed fence")
            block = Block(path, start + 1, fence["info"].lower(), "\n".join(body) + "\n")
            if pending is not None:
                if pending[0] != start - 1:
                    raise DocBlockError(
                        f"{path.name}:{pending[0] + 1}: a mark must be the line right "
                        "before its block's opening fence"
                    )
                _apply(block, pending[1])
                pending = None
            blocks.append(block)
        elif pending is not None and line.strip():
            raise DocBlockError(f"{name}:{pending[0] + 1}: a mark with no block after it")
        index += 1
    if pending is not None:
        raise DocBlockError(f"{name}:{pending[0] + 1}: a mark with no block after it")
    return blocks


def _apply(block: Block, found: re.Match[str]) -> None:
    block.marked = True
    block.kind = found["kind"]
    block.reason = (found["reason"] or "").strip()
    for item in found["options"].split():
        key, _, value = item.partition("=")
        if key in block.options:
            raise DocBlockError(f"{block.where}: option {key} given twice")
        block.options[key] = value


def check(blocks: Sequence[Block], *, whole: bool = True) -> None:
    """Raise ``DocBlockError`` for the first block that breaks the rules; else return.

    *whole*: *blocks* are all the documents' blocks, so the README's ``setup`` and
    ``ci`` blocks must be among them, once each.
    """
    for index, block in enumerate(blocks):
        _check_mark(block)
        _check_syntax(block)
        if block.kind == "client":
            before = blocks[index - 1] if index else None
            if before is None or before.kind != "server" or before.path != block.path:
                raise DocBlockError(f"{block.where}: a client block must follow a server block")
    for kind in ("setup", "ci") if whole else ():
        chosen = [block for block in blocks if block.kind == kind]
        if len(chosen) != 1 or chosen[0].path.name != "README.md" or chosen[0].path.parent != ROOT:
            raise DocBlockError(f"exactly one block of README.md must be marked {kind}")


def _check_mark(block: Block) -> None:
    where = block.where
    if block.marked and block.kind not in KINDS:
        raise DocBlockError(f"{where}: unknown kind {block.kind!r}; the kinds: {', '.join(KINDS)}")
    if block.marked and not block.reason:
        raise DocBlockError(f"{where}: the mark needs a reason, after ' — '")
    allowed = OPTIONS.get(block.kind, set())
    unknown = set(block.options) - allowed
    if unknown:
        raise DocBlockError(f"{where}: {block.kind} takes no option {', '.join(sorted(unknown))}")
    if "timeout" in block.options:
        try:
            if not 0 < float(block.options["timeout"]) <= 600:
                raise ValueError
        except ValueError:
            raise DocBlockError(f"{where}: timeout must be seconds, 0 to 600") from None
    runs = block.kind in ("setup", "ci", "run", "server", "client")
    if runs and block.language not in PYTHON + SHELL:
        raise DocBlockError(
            f"{where}: a {block.language or 'plain'} block cannot run: mark it "
            "(text, fragment or skip) with the reason"
        )
    if block.kind in ("setup", "ci", "server", "client") and block.language not in SHELL:
        raise DocBlockError(f"{where}: a {block.kind} block is shell commands")
    if block.kind == "server":
        port = block.options.get("port", "")
        if not port.isdigit():
            raise DocBlockError(f"{where}: a server block needs port=N")
        if not any(f"--port {port}" in command for command in block.commands):
            raise DocBlockError(f"{where}: no command of this server block uses --port {port}")
        if any(command.endswith("\\") for command in block.commands):
            raise DocBlockError(f"{where}: server commands must fit on one line each")
    elif block.kind in ("run", "setup") and re.search(r"--port \d", block.text):
        raise DocBlockError(f"{where}: this block starts a server: mark it server port=N")
    if block.extras and block.language in SHELL:
        installs = [c for c in block.commands if re.search(r"\bpip install\b", c)]
        named = {extra for c in installs for extra in _extras_installed(c)}
        missing = set(block.extras) - named
        if missing:
            raise DocBlockError(
                f"{where}: the block needs {', '.join(sorted(missing))} but no pip "
                "install in it names them: a reader must see how to get them"
            )


def _extras_installed(command: str) -> set[str]:
    found = re.search(r"\.\[([a-z,-]+)\]", command)
    return set(found.group(1).split(",")) if found else set()


def _check_syntax(block: Block) -> None:
    if block.language in PYTHON:
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if block.kind == "fragment" else 0
        try:
            compile(block.text, block.where, "exec", flags=flags, dont_inherit=True)
        except SyntaxError as exc:
            raise DocBlockError(f"{block.where}: Python syntax error: {exc}") from None
    elif block.language in SHELL:
        done = subprocess.run(
            ["bash", "-n"], input=block.text, capture_output=True, text=True, check=False
        )
        if done.returncode:
            raise DocBlockError(f"{block.where}: shell syntax error: {done.stderr.strip()}")
    elif block.language == "json":
        try:
            json.loads(block.text)
        except ValueError as exc:
            raise DocBlockError(f"{block.where}: not JSON: {exc}") from None


def all_blocks(root: Path = ROOT) -> list[Block]:
    return [block for path in documents(root) for block in parse(path)]


# -- running --------------------------------------------------------------------------


def copy_checkout(dest: Path, root: Path = ROOT) -> None:
    """Copy the files git sees in *root* (tracked, and untracked but not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = root / name
        if source.is_file():  # a tracked file deleted in the work tree is not copied
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def _environment(venv: Path | None) -> dict[str, str]:
    """A newcomer's shell: no virtualenv active, no aclasync settings, quiet pip."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
        and not key.startswith("ACLASYNC_")
    }
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PIP_QUIET="1")
    env.setdefault("PIP_ROOT_USER_ACTION", "ignore")
    if venv is not None:  # `python` in a block is the virtualenv's, as after activation
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float, what: str) -> str:
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(process)
        out, _ = process.communicate()
        raise DocBlockError(f"{what}: still running after {timeout:g} s\n{out}") from None
    if process.returncode:
        raise DocBlockError(f"{what}: exit status {process.returncode}\n{out}")
    return out


def _kill(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def run_block(block: Block, copy: Path, scripts: Path) -> str:
    """Run one ``setup``/``run`` block in *copy*; return its output."""
    env = _environment(copy / ".venv")
    if block.language in PYTHON:
        script = scripts / f"block-{block.path.stem}-{block.line}.py"
        script.write_text(block.text, encoding="utf-8")
        argv = [str(copy / ".venv" / "bin" / "python"), str(script)]
    else:
        argv = ["bash", "-euo", "pipefail", "-c", block.text]
    return _run(argv, copy, env, block.timeout, block.where)


def run_servers(server: Block, client: Block, copy: Path) -> str:
    """Start each server of *server* in turn, run *client* against it, stop it."""
    env = _environment(copy / ".venv")
    port = int(server.options["port"])
    log: list[str] = []
    for command in server.commands:
        if f"--port {port}" not in command:
            log.append(
                _run(
                    ["bash", "-euo", "pipefail", "-c", command],
                    copy,
                    env,
                    server.timeout,
                    server.where,
                )
            )
            continue
        if not _port_free(port):
            raise DocBlockError(f"{server.where}: port {port} is in use; free it and retry")
        process = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=copy,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            _wait_for_port(port, process, f"{server.where}: {command}")
            log.append(
                _run(
                    ["bash", "-euo", "pipefail", "-c", client.text],
                    copy,
                    env,
                    client.timeout,
                    f"{client.where} against {command}",
                )
            )
            process.send_signal(signal.SIGTERM)
            try:
                out, _ = process.communicate(timeout=SERVER_EXIT_S)
            except subprocess.TimeoutExpired:
                raise DocBlockError(
                    f"{server.where}: {command}: no exit {SERVER_EXIT_S:g} s after SIGTERM"
                ) from None
            if process.returncode:
                status = process.returncode
                raise DocBlockError(f"{server.where}: {command}: status {status} on SIGTERM\n{out}")
            log.append(out)
        finally:
            if process.poll() is None:
                _kill(process)
                process.communicate()
    return "".join(log)


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def _wait_for_port(port: int, process: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out, _ = process.communicate()
            raise DocBlockError(
                f"{what}: ended before serving (status {process.returncode})\n{out}"
            )
        if not _port_free(port):
            return
        time.sleep(0.1)
    raise DocBlockError(f"{what}: nothing listens on 127.0.0.1:{port} after {SERVER_START_S:g} s")


@contextlib.contextmanager
def fresh_copy(work: Path, name: str, setup: Block, extras: tuple[str, ...]) -> Iterator[Path]:
    """A fresh copy of the checkout with the README's install run in it (and *extras*)."""
    copy = work / name
    copy.mkdir()
    copy_checkout(copy)
    started = time.monotonic()
    run_block(setup, copy, work)
    if extras:
        install = [
            str(copy / ".venv" / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-e",
            f".[{','.join(extras)}]",
        ]
        _run(
            install,
            copy,
            _environment(None),
            DEFAULT_TIMEOUT_S,
            f"pip install -e '.[{','.join(extras)}]'",
        )
    added = f" + {','.join(extras)}" if extras else ""
    _say(f"   {name}: the README's install{added} in {time.monotonic() - started:.1f} s")
    yield copy


def run_all(blocks: Sequence[Block]) -> None:
    """Run every block that runs, grouped by extras, each group in a fresh copy."""
    setup = next(block for block in blocks if block.kind == "setup")
    groups: dict[tuple[str, ...], list[int]] = {}
    for index, block in enumerate(blocks):
        if block.kind in ("run", "server"):
            groups.setdefault(block.extras, []).append(index)
    groups.setdefault((), [])
    with tempfile.TemporaryDirectory(prefix="aclasync-doc-blocks-") as folder:
        work = Path(folder)
        for extras, indices in sorted(groups.items()):
            name = "base" if not extras else "+".join(extras)
            with fresh_copy(work, name, setup, extras) as copy:
                if not extras:
                    _say(f"ok {setup.where} (setup)")
                for index in indices:
                    block = blocks[index]
                    started = time.monotonic()
                    if block.kind == "server":
                        run_servers(block, blocks[index + 1], copy)
                        label = f"{block.where} + {blocks[index + 1].where} (servers)"
                    else:
                        run_block(block, copy, work)
                        label = f"{block.where} ({block.language})"
                    _say(f"ok {label} in {time.monotonic() - started:.1f} s")


def _say(line: str) -> None:
    print(line, flush=True)


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] not in ("check", "run", "command", "copy"):
        print(__doc__.split("Usage", 1)[1].split("\n", 2)[2], file=sys.stderr)
        return 2
    if argv[0] == "copy":
        copy_checkout(Path(argv[1]))
        return 0
    try:
        blocks = all_blocks()
        check(blocks)
        check_rst()
        if argv[0] == "command":
            (chosen,) = [block for block in blocks if block.kind == argv[1]]
            print(chosen.text.strip())
            return 0
        counts = {kind: sum(block.kind == kind for block in blocks) for kind in KINDS}
        summary = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
        _say(f"{len(blocks)} blocks in {len(documents())} documents: {summary}")
        if argv[0] == "run":
            started = time.monotonic()
            run_all(blocks)
            _say(f"every block ran as written in {time.monotonic() - started:.0f} s")
    except DocBlockError as exc:
        print(f"doc-blocks: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
