"""Reading PBS Pro's `qstat -f -F json` when it is not JSON.

PBS Pro writes that output by hand, one attribute a line, and known builds get it wrong (OpenPBS issues, open as of
2025): environment values that look numeric are written unquoted (`"foo":005`, issue 1255); backslashes and exported
bash functions in Variable_List give escapes JSON does not have (`\\'`, `\\,`, issue 2541; partly fixed by PR 2049)
and unescaped quotes (PR 830). One such value in one job makes the whole document invalid, and on a shared login
node any user's environment can hold one.

`read_jobs` therefore reads the document whole when it is valid, and otherwise job by job: each job's lines are
read as they are, then with each broken value line repaired (invalid escapes lose their backslash, as PR 2049 does;
stray quotes are escaped; unquoted non-numbers are quoted), then without their Variable_List (which the watcher does
not need). A job that still cannot be read is returned by id as unreadable, for the caller to ask again in the text
form (`qstat -f`).
"""
from __future__ import annotations

import json
import re
import typing as tp

Jobs = tp.Dict[str, tp.Dict[str, tp.Any]]

_JOBS_KEY = re.compile(r'^\s*"Jobs"\s*:\s*\{\s*$')
_OBJECT_START = re.compile(r'^(\s*)"([^"]+)"\s*:\s*\{\s*$')   # `"12345.server":{`, `"Variable_List":{`
_ATTRIBUTE = re.compile(r'^(\s*"[^"]*"\s*:\s*)(.*?)(,?)\s*$')   # `"key":value,` (PBS Pro puts one a line)
_JSON_ESCAPES = set('"\\/bfnrt')


def read_jobs(text: tp.Union[str, bytes]) -> tp.Tuple[Jobs, tp.List[str]]:
    """(jobs it could read {id: attributes}, ids of jobs it could not read). Never raises on malformed output."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    text = text.strip()
    if not text:
        return {}, []
    try:
        data = json.loads(text)
    except ValueError:
        pass
    else:
        jobs = data.get("Jobs") if isinstance(data, dict) else None
        return ({k: v for k, v in jobs.items() if isinstance(v, dict)} if isinstance(jobs, dict) else {}), []
    out: Jobs = {}
    unreadable: tp.List[str] = []
    for job_id, body in _job_chunks(text.splitlines()):
        attrs = _read_job(body)
        if attrs is None:
            unreadable.append(job_id)
        else:
            out[job_id] = attrs
    return out, unreadable


def _job_chunks(lines: tp.List[str]) -> tp.Iterator[tp.Tuple[str, tp.List[str]]]:
    """(job id, the lines between its `"id":{` and its closing brace) for each job under "Jobs"."""
    start = next((i for i, line in enumerate(lines) if _JOBS_KEY.match(line)), None)
    if start is None:
        return
    indent = None
    i = start + 1
    while i < len(lines):
        match = _OBJECT_START.match(lines[i])
        if match and (indent is None or match.group(1) == indent):
            indent = match.group(1)
            end = _closing_line(lines, i + 1, indent)
            yield match.group(2), lines[i + 1:end]
            i = end + 1
        else:
            i += 1


def _closing_line(lines: tp.List[str], start: int, indent: str) -> int:
    """The index of the `}` or `},` at `indent` that closes the object opened just before `start`."""
    for j in range(start, len(lines)):
        if lines[j].rstrip() in (indent + "}", indent + "},"):
            return j
    return len(lines)


def _read_job(body: tp.List[str]) -> tp.Optional[tp.Dict[str, tp.Any]]:
    repaired = [_repair_line(line) for line in body]
    for attempt in (body, repaired, _without_object(repaired, "Variable_List")):
        try:
            attrs = json.loads("{" + "\n".join(attempt) + "}")
        except ValueError:
            continue
        if isinstance(attrs, dict):
            return attrs
    return None


def _repair_line(line: str) -> str:
    """A `"key":value,` line whose value is not JSON, made JSON; any other line as it is."""
    match = _ATTRIBUTE.match(line)
    if not match or _OBJECT_START.match(line):
        return line
    head, value, comma = match.groups()
    try:
        json.loads(value)
        return line
    except ValueError:
        pass
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        return head + _json_string(value[1:-1]) + comma
    return head + json.dumps(value) + comma  # 005, 0x1f, 1.2.3: PBS Pro left the string unquoted


def _json_string(inner: str) -> str:
    """The text between a value's quotes as PBS Pro wrote it -> a JSON string literal."""
    out = []
    i = 0
    while i < len(inner):
        char = inner[i]
        if char == "\\" and i + 1 < len(inner):
            nxt = inner[i + 1]
            if nxt in _JSON_ESCAPES:
                out.append(char + nxt)
                i += 2
                continue
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", inner[i + 2:i + 6]):
                out.append(inner[i:i + 6])
                i += 6
                continue
            out.append(json.dumps(nxt)[1:-1])  # \' \, \$ ...: PBS's own escape of a plain character
            i += 2
            continue
        out.append(json.dumps(char)[1:-1])  # a stray quote, a lone trailing backslash, a control byte
        i += 1
    return '"' + "".join(out) + '"'


def _without_object(lines: tp.List[str], key: str) -> tp.List[str]:
    """The lines without the object attribute `key` (from `"key":{` to its closing brace), commas kept valid."""
    for i, line in enumerate(lines):
        match = _OBJECT_START.match(line)
        if match and match.group(2) == key:
            end = _closing_line(lines, i + 1, match.group(1))
            kept = lines[:i] + lines[end + 1:]
            if end + 1 >= len(lines) and kept:  # it was the last attribute: the one before loses its comma
                kept[-1] = kept[-1].rstrip().rstrip(",")
            return kept
    return lines
