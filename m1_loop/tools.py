"""The model's hands: three plain functions and the schemas that describe them to the model."""
import json
from pathlib import Path


def list_dir(workspace, path="."):
    folder = Path(workspace) / path
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    return "\n".join(names) or "(empty folder)"


def read_file(workspace, path):
    return (Path(workspace) / path).read_text(encoding="utf-8", errors="replace")


def write_file(workspace, path, content):
    data = content.encode("utf-8")  # encode first: a failure must not leave an emptied file behind
    (Path(workspace) / path).write_bytes(data)
    return f"wrote {len(content)} characters to {path}"


TOOLS = {"list_dir": list_dir, "read_file": read_file, "write_file": write_file}


def schema(name, description, **params):
    """The JSON schema the model sees: every parameter is a required string."""
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "required": list(params),
                       "properties": {k: {"type": "string", "description": v} for k, v in params.items()}}}}


SCHEMAS = [
    schema("list_dir", "List the files and folders in a folder of the workspace.",
           path="folder path relative to the workspace, '.' for the top"),
    schema("read_file", "Read a text file of the workspace.", path="file path relative to the workspace"),
    schema("write_file", "Create or overwrite a text file in the workspace.",
           path="file path relative to the workspace", content="the full text to write"),
]


def run_tool(workspace, name, arguments):
    """Run one call. Whatever goes wrong becomes text for the model; the loop never crashes here."""
    try:
        return TOOLS[name](workspace, **json.loads(arguments or "{}"))
    except Exception as e:  # m2 turns this catch-all into messages the model can act on
        return f"error: {type(e).__name__}: {e}"
