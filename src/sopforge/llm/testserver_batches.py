"""The batch APIs of the fake server: OpenAI's files + batches, Anthropic's message batches.

Enough of both for the real SDKs to submit a batch, poll it and read its results offline:

- OpenAI: ``POST /v1/files`` (multipart, purpose ``batch``, a JSONL of chat completion requests),
  ``POST /v1/batches``, ``GET /v1/batches/{id}``, ``GET /v1/files/{id}/content`` (the output JSONL);
- Anthropic: ``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}`` and
  ``GET /v1/messages/batches/{id}/results`` (JSONL, the batch's ``results_url``).

A batch is answered by the server's responder (or scripted actions), request by request, once
``batch_seconds`` have passed since it was created; until then it is in progress. The server keeps
its batches for its lifetime, so a test can stop a client mid-batch and let another poll it.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.parser import BytesParser
from email.policy import default as email_policy
from typing import Any

from sopforge.llm.testserver_wire import completion_body

__all__ = ["FakeBatch", "BatchBackend"]


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass
class FakeBatch:
    """One batch job as the server holds it."""

    id: str
    protocol: str
    requests: list[dict[str, Any]]  # {"custom_id", "body"}
    created: float
    results: list[dict[str, Any]] | None = None
    output_file_id: str | None = None
    polls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class BatchBackend:
    """The batch state of one fake server (``server.batches``)."""

    def __init__(self, owner: Any):
        self.owner = owner
        self.jobs: dict[str, FakeBatch] = {}
        self.files: dict[str, bytes] = {}
        self._lock = threading.Lock()

    # -- routing -------------------------------------------------------------------------------
    def post(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, Any] | None:
        path = path.split("?")[0].rstrip("/")
        if path.endswith("/v1/files"):
            return self._upload(headers.get("content-type", ""), raw)
        if path.endswith("/v1/batches"):
            return self._create_openai(json.loads(raw or b"{}"))
        if path.endswith("/v1/messages/batches"):
            return self._create_anthropic(json.loads(raw or b"{}"))
        return None

    def get(self, path: str) -> tuple[int, Any] | None:
        parts = path.split("?")[0].rstrip("/").split("/")
        if parts[-3:-1] == ["v1", "batches"]:
            return self._retrieve(parts[-1], "openai")
        if parts[-1] == "content" and parts[-3] == "files":
            data = self.files.get(parts[-2])
            return (200, data) if data is not None else (404, {"error": {"message": "no such file"}})
        if parts[-3:-1] == ["messages", "batches"]:
            return self._retrieve(parts[-1], "anthropic")
        if parts[-1] == "results" and parts[-3] == "batches":
            job = self.jobs.get(parts[-2])
            if job is None or job.results is None:
                return 404, {"type": "error", "error": {"type": "not_found_error", "message": "no results yet"}}
            return 200, "".join(json.dumps(r) + "\n" for r in job.results).encode()
        return None

    # -- OpenAI ----------------------------------------------------------------------------------
    def _upload(self, content_type: str, raw: bytes) -> tuple[int, Any]:
        message = BytesParser(policy=email_policy).parsebytes(
            b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
        data, name = b"", "batch.jsonl"
        for part in message.iter_parts():
            if part.get_param("name", header="content-disposition") == "file":
                data = part.get_payload(decode=True) or b""
                name = part.get_filename() or name
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        self.files[file_id] = data
        return 200, {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                     "filename": name, "purpose": "batch", "status": "processed"}

    def _create_openai(self, body: dict[str, Any]) -> tuple[int, Any]:
        lines = self.files.get(body.get("input_file_id", ""), b"").decode().splitlines()
        requests = [{"custom_id": r["custom_id"], "body": r["body"]} for r in map(json.loads, filter(None, lines))]
        job = self._new("batch_", "openai", requests)
        return 200, self._openai_view(job)

    def _openai_view(self, job: FakeBatch) -> dict[str, Any]:
        done = job.results is not None
        return {"id": job.id, "object": "batch", "endpoint": "/v1/chat/completions", "errors": None,
                "input_file_id": "file-in", "completion_window": "24h",
                "status": "completed" if done else "in_progress", "output_file_id": job.output_file_id,
                "error_file_id": None, "created_at": int(job.created), "completed_at": int(time.time()) if done else None,
                "request_counts": {"total": len(job.requests), "completed": len(job.requests) if done else 0,
                                   "failed": 0}}

    # -- Anthropic -------------------------------------------------------------------------------
    def _create_anthropic(self, body: dict[str, Any]) -> tuple[int, Any]:
        requests = [{"custom_id": r["custom_id"], "body": r["params"]} for r in body.get("requests", [])]
        return 200, self._anthropic_view(self._new("msgbatch_", "anthropic", requests))

    def _anthropic_view(self, job: FakeBatch) -> dict[str, Any]:
        done = job.results is not None
        n = len(job.requests)
        return {"id": job.id, "type": "message_batch", "processing_status": "ended" if done else "in_progress",
                "request_counts": {"processing": 0 if done else n, "succeeded": n if done else 0, "errored": 0,
                                   "canceled": 0, "expired": 0},
                "created_at": _iso(job.created), "expires_at": _iso(job.created + 86400),
                "ended_at": _iso(time.time()) if done else None, "archived_at": None, "cancel_initiated_at": None,
                "results_url": f"{self.owner.anthropic_base_url}/v1/messages/batches/{job.id}/results" if done else None}

    # -- both --------------------------------------------------------------------------------------
    def _new(self, prefix: str, protocol: str, requests: list[dict[str, Any]]) -> FakeBatch:
        now = time.time()
        job = FakeBatch(id=f"{prefix}{uuid.uuid4().hex[:24]}", protocol=protocol, requests=requests, created=now)
        with self._lock:
            self.jobs[job.id] = job
        return job

    def _retrieve(self, job_id: str, protocol: str) -> tuple[int, Any]:
        job = self.jobs.get(job_id)
        if job is None or job.protocol != protocol:
            return 404, {"error": {"message": f"no batch {job_id}"}}
        with job.lock:
            job.polls += 1
            # Read now, not at creation: a test may shorten the wait of a job already submitted.
            if job.results is None and time.time() >= job.created + self.owner.batch_seconds:
                self._answer(job)
        return 200, self._openai_view(job) if protocol == "openai" else self._anthropic_view(job)

    def _answer(self, job: FakeBatch) -> None:
        results = []
        for request in job.requests:
            action, seq = self.owner._next_action(request["body"], job.protocol)
            body = completion_body(job.protocol, request["body"], action, seq, self.owner.cache)
            if job.protocol == "openai":
                results.append({"id": f"batch_req_{seq}", "custom_id": request["custom_id"], "error": None,
                                "response": {"status_code": 200, "request_id": f"req_{seq}", "body": body}})
            else:
                results.append({"custom_id": request["custom_id"], "result": {"type": "succeeded", "message": body}})
        if job.protocol == "openai":
            job.output_file_id = f"file-{uuid.uuid4().hex[:24]}"
            self.files[job.output_file_id] = "".join(json.dumps(r) + "\n" for r in results).encode()
        job.results = results
