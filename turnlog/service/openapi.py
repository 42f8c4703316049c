"""The OpenAPI document of the service, served at ``/openapi.json``.

Written out rather than generated: the resources are few, and their
contract (status codes, the problem body, the stream's ids) is the part a
generator would not know.
"""

from __future__ import annotations

from typing import Any

from turnlog import __version__

_PROBLEM = {"$ref": "#/components/responses/Problem"}
_SESSION = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
}
_IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "description": "the client's id for this input: a retry with it is "
    "answered as the original request was, recording nothing; with another "
    "body it is a 409",
    "schema": {"type": "string", "minLength": 1, "maxLength": 200},
}
_TEXT = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["text"],
                "properties": {"text": {"type": "string"}},
                "additionalProperties": False,
            }
        }
    },
}


def _ok(description: str, status: str = "200") -> dict[str, Any]:
    return {
        status: {"description": description},
        "401": _PROBLEM,
        "404": _PROBLEM,
        "422": _PROBLEM,
    }


def openapi_document() -> dict[str, Any]:
    """The service's OpenAPI 3.1 document."""
    session_paths: dict[str, Any] = {
        "/sessions": {
            "get": {"summary": "The tenant's sessions", "responses": _ok("sessions")},
            "post": {
                "summary": "Create a session",
                "requestBody": {
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "agent": {"type": "string"},
                                    "shared_state": {"type": "object"},
                                },
                                "additionalProperties": False,
                            }
                        }
                    }
                },
                "responses": _ok("the new session's checkpoint", "201"),
            },
        },
        "/sessions/{session_id}": {
            "get": {
                "summary": "The session's checkpoint (state, usage, messages)",
                "parameters": [_SESSION],
                "responses": _ok(
                    "the checkpoint (output: the last typed answer, for an "
                    "agent with an output_type)"
                ),
            }
        },
        "/sessions/{session_id}/prompts": {
            "post": {
                "summary": "Send a prompt; returns the run (?wait=true: when it ends)",
                "parameters": [
                    _SESSION,
                    {"name": "wait", "in": "query", "schema": {"type": "boolean"}},
                    _IDEMPOTENCY_KEY,
                ],
                "requestBody": _TEXT,
                "responses": {
                    **_ok("the finished run (wait=true; output: its typed answer)"),
                    "202": {"description": "the run started"},
                    "409": _PROBLEM,
                },
            }
        },
        "/sessions/{session_id}/follow-ups": {
            "post": {
                "summary": "Queue input behind the running turn",
                "parameters": [_SESSION, _IDEMPOTENCY_KEY],
                "requestBody": _TEXT,
                "responses": {**_ok("queued", "202"), "409": _PROBLEM},
            }
        },
        "/sessions/{session_id}/steer": {
            "post": {
                "summary": "Add input to the running turn before its next model call",
                "parameters": [_SESSION, _IDEMPOTENCY_KEY],
                "requestBody": _TEXT,
                "responses": {**_ok("accepted", "202"), "409": _PROBLEM},
            }
        },
        "/sessions/{session_id}/interrupt": {
            "post": {
                "summary": "Abort the running turn",
                "parameters": [_SESSION],
                "responses": {**_ok("interrupted", "202"), "409": _PROBLEM},
            }
        },
        "/sessions/{session_id}/children": {
            "get": {
                "summary": "Child sessions (agents used as tools), as a tree, "
                "and the tree's usage by agent",
                "parameters": [_SESSION],
                "responses": _ok("the children"),
            }
        },
        **_lineage_paths(),
        "/sessions/{session_id}/approvals": {
            "get": {
                "summary": "Pending approval requests (a child session's name it)",
                "parameters": [_SESSION],
                "responses": _ok("the pending requests"),
            }
        },
        "/sessions/{session_id}/approvals/{request_id}": {
            "post": {
                "summary": "Decide an approval request (again with the same "
                "decision: a no-op; with another: a 409)",
                "parameters": [
                    _SESSION,
                    {
                        "name": "request_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                    _IDEMPOTENCY_KEY,
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["decision"],
                                "properties": {
                                    "decision": {
                                        "enum": [
                                            "allow",
                                            "allow_session",
                                            "deny",
                                            "abort",
                                        ]
                                    }
                                },
                            }
                        }
                    },
                },
                "responses": {**_ok("decided"), "409": _PROBLEM},
            }
        },
        "/sessions/{session_id}/transcript": {
            "get": {
                "summary": "A page of the transcript, oldest first",
                "parameters": [
                    _SESSION,
                    {"name": "before", "in": "query", "schema": {"type": "integer"}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                ],
                "responses": _ok("the page; next_before pages further back"),
            }
        },
        "/sessions/{session_id}/audit": {
            "get": {
                "summary": "The session's timeline and its chain verification",
                "parameters": [_SESSION],
                "responses": _ok("timeline and verification"),
            }
        },
        "/sessions/{session_id}/executions": {
            "get": {
                "summary": (
                    "The newest turns (oldest first): outcome, tokens, time, and "
                    "each model step's tokens and time"
                ),
                "parameters": [
                    _SESSION,
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 200},
                    },
                ],
                "responses": _ok("the turns and their steps"),
            }
        },
        "/agents": {
            "get": {
                "summary": "The agents a session may be created with, and the default",
                "responses": {"200": {"description": "agents"}, "401": _PROBLEM},
            }
        },
        "/sessions/{session_id}/events": {
            "get": {
                "summary": (
                    "The session's event stream (text/event-stream). Each durable "
                    "event's id is its log position (POSITION or POSITION:INDEX); "
                    "reconnect with Last-Event-ID to resume with no gap and no "
                    "duplicate. Text deltas carry no id and are not resumable. "
                    "Each event's data is an Event as JSON: session_id, "
                    "submission_id, turn_id, sequence, msg, event_id "
                    "(SESSION:SEQUENCE:INDEX, stable across replays and "
                    "processes; null for a delta), timestamp (RFC 3339, when "
                    "the fact was recorded), trace_id (the session's "
                    "OpenTelemetry trace) and schema_version."
                ),
                "parameters": [
                    _SESSION,
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "schema": {"type": "string"},
                    },
                    {
                        "name": "last_event_id",
                        "in": "query",
                        "schema": {"type": "string"},
                    },
                ],
                "responses": _ok("the stream"),
            }
        },
        "/agui": {
            "post": {
                "summary": (
                    "Runs a session as an AG-UI agent: the body is an AG-UI "
                    "RunAgentInput (threadId = session id, a new session of the "
                    "caller's tenant if it has none by that id, running the "
                    "agent forwardedProps.agent names or the default one; "
                    "resume entries decide pending approvals); the answer is "
                    "AG-UI events over SSE."
                ),
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
                "responses": _ok("the run's AG-UI events (text/event-stream)"),
            }
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "turnlog service", "version": __version__},
        "security": [{"bearer": []}],
        "paths": session_paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "responses": {
                "Problem": {
                    "description": "an application/problem+json body (RFC 9457)",
                    "content": {
                        "application/problem+json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "type": {"type": "string"},
                                    "title": {"type": "string"},
                                    "status": {"type": "integer"},
                                    "detail": {"type": "string"},
                                    "field": {"type": "string"},
                                },
                            }
                        }
                    },
                }
            },
        },
    }


def _point_schema(extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "before_input": {
                            "type": "integer",
                            "minimum": 1,
                            "description": "before user input N (from 1)",
                        },
                        "after_turn": {
                            "type": "integer",
                            "minimum": 0,
                            "description": "after turn N (0: before the first)",
                        },
                        **extra,
                    },
                    "additionalProperties": False,
                }
            }
        }
    }


def _lineage_paths() -> dict[str, Any]:
    """Forks, rewinds, the quiet points and the fork tree."""
    return {
        "/sessions/{session_id}/fork": {
            "post": {
                "summary": "Fork the session at a quiet point (one of before_input "
                "and after_turn; neither: the latest) into a new session of "
                "the tenant; pending approvals and queued input are not "
                "carried, session allowances only with keep_allowances",
                "parameters": [_SESSION],
                "requestBody": _point_schema(
                    {
                        "session_id": {"type": "string"},
                        "keep_allowances": {"type": "boolean", "default": False},
                    }
                ),
                "responses": {
                    **_ok("the fork's checkpoint (with forked_from)", "201"),
                    "409": _PROBLEM,
                },
            }
        },
        "/sessions/{session_id}/rewind": {
            "post": {
                "summary": "Set the turns after a quiet point aside, in place "
                "(one of before_input and after_turn); 409 while a turn runs",
                "parameters": [_SESSION],
                "requestBody": {"required": True, **_point_schema({})},
                "responses": {
                    **_ok("the turns set aside (set_aside)"),
                    "409": _PROBLEM,
                },
            }
        },
        "/sessions/{session_id}/history": {
            "get": {
                "summary": "The quiet points a fork or rewind may name (after_turn, "
                "input, position, preview, rewound)",
                "parameters": [_SESSION],
                "responses": _ok("the points, in order"),
            }
        },
        "/sessions/{session_id}/lineage": {
            "get": {
                "summary": "Where the session was forked from (sources, nearest "
                "first), the tenant's forks of it as a tree, and its rewinds",
                "parameters": [_SESSION],
                "responses": _ok("the lineage"),
            }
        },
    }


__all__ = ["openapi_document"]
