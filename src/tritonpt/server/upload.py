"""A local repository's models delivered to a server at a URL through its load API, and taken back after.

    Upload.of(model)                 config.pbtxt and the files of its version folders, as one load request
    Uploaded(endpoints, uploads, replace=False)
        .load_all() / .unload_all()  what this run loads, and unloads again (also after a failure or a stop)
        .unload(name) / .load(name)  one model out and in again; .lost() one the server no longer has ready

The server must run with ``--model-control-mode=explicit``; one model's files go in one gRPC message (2 GiB).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import json_format
from tritonclient.grpc.model_config_pb2 import ModelConfig
from tritonclient.utils import InferenceServerException

from tritonpt import client, repository
from tritonpt.client import Endpoints
from tritonpt.errors import HINT, ServerStartError
from tritonpt.repository import PT2_PLATFORM
from tritonpt.server import logtext
from tritonpt.versions import VERSIONS

MAX_BYTES = 2**31 - 1 - 2**20
"""One model's files at most: a gRPC message of tritonclient's largest size, less a MiB for the config and framing."""


DROPPED = "StatusCode.UNAVAILABLE"
"""What tritonclient says where a gRPC call's connection was lost or refused (``Stream removed``, ``Connection
reset by peer``): gRPC's status for a transport failure; server 2.51.0 also answers a restricted protocol's
request without its header with it (logtext.RESTRICTED)."""


class UploadError(ServerStartError):
    """A model could not be delivered to the server (or was refused there); nothing of this run stays loaded."""


@dataclass(frozen=True, kw_only=True)
class Upload:
    """What a load request carries for one model."""

    name: str
    config: ModelConfig
    files: Mapping[str, bytes] = field(repr=False)  # "file:1/model.pt" -> its bytes

    def request_config(self, *, pt2_backend: str | None) -> str:
        """The config as the load request's JSON; a torch_aoti model's names ``pt2_backend`` where the server
        predates Triton 26.03's own PT2 path (as LocalServer's served copy does, tritonpt.repository)."""
        config = ModelConfig()
        config.CopyFrom(self.config)
        if pt2_backend is not None and config.platform == PT2_PLATFORM:
            config.backend = pt2_backend
        return json_format.MessageToJson(config)

    @property
    def size(self) -> int:
        return sum(len(data) for data in self.files.values())

    @classmethod
    def of(cls, model: repository.ModelDir) -> Upload:
        """The model's config and its version folders' files; ``UploadError`` naming the file when one is missing
        or the whole is larger than one request carries."""
        try:
            config = repository.read_config(model.config)
        except (OSError, ValueError) as exc:
            msg = f"Cannot upload {model.name}: {model.config} cannot be read ({exc}).\n{HINT} fix or re-export it."
            raise UploadError(msg) from exc
        files: dict[str, bytes] = {}
        for path in sorted(p for p in model.root.rglob("*") if p.is_file() and p.parent != model.root):
            files[f"file:{path.relative_to(model.root).as_posix()}"] = (
                path.read_bytes()
            )  # versions, warmup data
        if not model.versions():
            msg = (
                f"Cannot upload {model.name}: {model.root} has no version folder with files (such as "
                f"{model.model_file()}).\n{HINT} export it (`tritonpt export`) or copy its model file there."
            )
            raise UploadError(msg)
        made = cls(name=model.name, config=config, files=files)
        if made.size > MAX_BYTES:
            msg = (
                f"Cannot upload {model.name}: its files are {made.size / 2**20:,.0f} MiB, and one load request "
                f"carries at most {MAX_BYTES / 2**20:,.0f} MiB (a gRPC message of tritonclient's largest size).\n"
                f"{HINT} put the model in the server's own repository and check it there without --upload."
            )
            raise UploadError(msg)
        return made


def uploads(folder: Path, names: Iterable[str] = ()) -> list[Upload]:
    """The uploads of a repository's models (only ``names``, where given)."""
    wanted = set(names)
    return [Upload.of(m) for m in repository.models(folder) if not wanted or m.name in wanted]


@dataclass
class Uploaded:
    """The models this run delivered to one server, so that it can take them all back."""

    endpoints: Endpoints
    uploads: Sequence[Upload]
    replace: bool = False
    loaded: list[str] = field(default_factory=list)  # every name a load was sent for: unload_all's list
    serving: list[str] = field(default_factory=list)  # loaded, and not unloaded by this run since
    _turn: int = field(default=0, repr=False)  # which of them lost() asks about next
    pt2_backend: str | None = None  # the second backend name a server before 26.03 serves torch_aoti under

    def load_all(self) -> None:
        server = str(client.server_metadata(self.endpoints).get("version", ""))
        self.pt2_backend = None if VERSIONS.pt2.native(server) else VERSIONS.pt2.backend_name
        present = {u.name for u in self.uploads if client.is_model_ready(self.endpoints, u.name)}
        clash = sorted(present & {u.name for u in self.uploads})
        if clash and not self.replace:
            msg = (
                f"Cannot upload {', '.join(clash)} to {self.endpoints.http_url}: the server already serves a model of "
                "that name, and an upload would replace it.\n"
                f"{HINT} rename yours, or pass --replace-loaded to replace it (it is unloaded, not restored, after "
                "the check)."
            )
            raise UploadError(msg)
        try:
            for upload in self.uploads:
                self.load(upload.name)
        except BaseException:
            self.unload_all()
            raise

    def load(self, name: str) -> None:
        upload = next(u for u in self.uploads if u.name == name)
        try:
            with client.grpc(self.endpoints) as grpc:
                grpc.load_model(
                    name, config=upload.request_config(pt2_backend=self.pt2_backend), files=dict(upload.files)
                )
        except InferenceServerException as exc:
            raise UploadError(self._refused(upload, exc)) from None
        finally:  # a load the server refused may still have left the name behind: unload it with the rest
            if name not in self.loaded:
                self.loaded.append(name)
        self.serving.append(name)

    def unload(self, name: str) -> None:
        """Unload one of this run's models, which it may load again (it is no longer expected to be ready)."""
        with contextlib.suppress(ValueError):
            self.serving.remove(name)  # first: whoever asks lost() meanwhile must not count it
        with client.grpc(self.endpoints) as grpc:
            grpc.unload_model(name)

    def lost(self) -> str | None:
        """A model this run loaded, and did not unload since, that the server no longer has ready, else None.
        One model is asked per call, in turn (a watchdog asks twice a second; a restart loses them all)."""
        serving = list(self.serving)
        if not serving:
            return None
        self._turn = (self._turn + 1) % len(serving)
        name = serving[self._turn]
        return None if client.is_model_ready(self.endpoints, name) or name not in self.serving else name

    def _refused(self, upload: Upload, exc: InferenceServerException) -> str:
        said = logtext.briefly(str(exc.message() or exc))
        where = f"Cannot upload {upload.name} ({upload.size / 2**20:,.1f} MiB) to {self.endpoints.grpc}"
        if exc.status() == DROPPED and logtext.RESTRICTED not in said:
            return (
                f"{where}: the connection was lost during the upload ({exc.status()}: {said}); what this run "
                f"had uploaded is unloaded.\n{HINT} check that the server still runs, and that nothing between "
                "(a proxy, a load balancer, an ingress) cuts long or large gRPC requests; then run the check again."
            )
        if logtext.LOAD_FAILED in said:  # it took the upload, and could not load the model
            hint = logtext.hint_for(said) or (
                "fix the model (`tritonpt validate` on the repository says what it can tell without a server) "
                "and run the check again"
            )
            return f"{where}: the server could not load it ({exc.status()}: {said}); what this run had uploaded is unloaded.\n{HINT} {hint.rstrip('.')}."
        return f"{where}: the server answered {exc.status()}: {said}\n{HINT} {'; '.join(self._hints())}."

    @staticmethod
    def _hints() -> list[str]:
        return [
            "the server must run with --model-control-mode=explicit to take uploads",
            f"a restricted model-repository API needs its key in ${client.ADMIN_KEY_ENV} (the header's name in "
            f"${client.ADMIN_HEADER_ENV}, default {client.ADMIN_HEADER})"
            if client.admin_header() is None
            else f"the key in ${client.ADMIN_KEY_ENV} went with the request: check that it is the server's",
        ]

    def unload_all(self) -> list[str]:
        """Unload every model this run loaded (best effort: a server that went away has nothing left to unload);
        what could not be unloaded, with why."""
        left: list[str] = []
        self.serving.clear()  # first: whoever asks lost() meanwhile must not count what this unloads
        for name in list(self.loaded):
            try:
                with client.grpc(self.endpoints) as grpc:
                    grpc.unload_model(name)
            except (InferenceServerException, OSError) as exc:
                left.append(f"{name}: {' '.join(str(exc).split())}")
            else:
                with contextlib.suppress(ValueError):
                    self.loaded.remove(name)
        return left
