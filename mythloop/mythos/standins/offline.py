"""Deterministic offline stand-ins for every Mythos model call (no model, no network).

`OfflineBackend` puts them behind the backend interface, as the "offline" model backend:
`mythloop.llm.get_backend("offline")` finds it through the `mythloop.backends` entry-point group
(pyproject.toml), and importing this module registers it too.
"""

from __future__ import annotations

import json
import re
import time

from mythloop.llm.base import DEFAULT_TIMEOUT, Backend, Completion
from mythloop.llm.errors import BackendError, EmptyOutput
from mythloop.llm.registry import register_backend
from mythloop.mythos.code.extract import ExtractionError, extract_json_object

__all__ = ["offline_response", "offline_artifact", "OFFLINE_SCENE_NAME", "offline_scene", "offline_repair",
           "topic_from_prompt", "OfflineBackend"]

OFFLINE_SCENE_NAME = "MythosOfflineJourney"
_MARKER = "INPUT ARTIFACT JSON:"
_DEFAULT_TOPIC = "an idea worth a film"


def topic_from_prompt(prompt: str) -> str:
    """The film's topic: `user_prompt` or `topic` from the prompt's input artifact, else a default."""
    text = prompt or ""
    # A repair prompt carries the offline header itself: reuse its topic so repairs stay identical.
    scene_title = re.search(r'^TOPIC = ("(?:[^"\\]|\\.)*")$', text, re.M)
    if scene_title and OFFLINE_SCENE_NAME in text:
        return json.loads(scene_title.group(1))
    start = text.find(_MARKER)
    if start == -1:
        start = text.find("DOSSIER JSON:")
    if start != -1:
        try:
            artifact = extract_json_object(text[start:])
        except ExtractionError:
            artifact = {}
        for key in ("user_prompt", "topic"):
            value = artifact.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
        # The codegen dossier nests the stage artifacts one level down.
        for value in artifact.values():
            if isinstance(value, dict) and isinstance(value.get("topic"), str):
                return value["topic"].strip()
    return _DEFAULT_TOPIC


def _intent(topic: str) -> dict:
    return {
        "offline": True,
        "topic": topic,
        "core_claim": f"Offline stand-in: one clear idea about {topic}, shown rather than told.",
        "audience": "A curious adult with high-school algebra (offline rehearsal audience).",
        "emotional_arc": ["curiosity at a puzzle", "a picture that makes it concrete", "the click of the key term"],
        "scope": {"in": [f"the central formula of {topic}", "one picture per idea"], "out": ["proofs", "history"]},
        "duration_seconds": 90,
        "title_options": [f"{topic.title()}", "One Idea, Shown", "An Offline Rehearsal"],
        "the_big_zoom": "The single term of the central formula that carries the idea.",
    }


def _knowledge_map(topic: str) -> dict:
    nodes = [
        ("picture", "The picture", 2, True, "a dot on a curve"),
        ("formula", "The formula", 1, False, "a MathTex in coloured parts"),
        ("key_term", "The key term", 1, False, "a zoom into one part"),
        ("claim", f"The claim about {topic}", 0, False, "a closing headline"),
    ]
    return {
        "offline": True,
        "topic": topic,
        "target": f"The core claim about {topic} (offline stand-in).",
        "nodes": [
            {"id": nid, "name": name, "why_needed": f"Step toward the claim about {topic}.", "depth": depth,
             "assumed": assumed, "visual_seed": seed}
            for nid, name, depth, assumed, seed in nodes
        ],
        "edges": [["picture", "formula"], ["formula", "key_term"], ["key_term", "claim"]],
        "spine": ["picture", "formula", "key_term", "claim"],
    }


def _curriculum(topic: str) -> dict:
    titles = ["The question", "The formula", "The key term"]
    return {
        "offline": True,
        "topic": topic,
        "acts": [
            {"act_number": n, "title": title, "opening_question": f"What is act {n} about?",
             "teaches": f"Idea {n} of {topic}.", "narrative": "A headline, a picture, a caption.",
             "headline": title, "payoff": f"Idea {n} lands.", "estimated_seconds": 30}
            for n, title in enumerate(titles, start=1)
        ],
        "through_line": f"Each act moves one step closer to the key term of {topic}.",
    }


def _math_dossier(topic: str) -> dict:
    return {
        "offline": True,
        "topic": topic,
        "formulas": [
            {
                "id": "f1",
                "act_number": 2,
                "latex_parts": ["e^{i\\pi}", "+", "1", "=", "0"],
                "term_glossary": [
                    {"part_index": 0, "plain_words": "Half a turn around the unit circle", "identity": "rotation", "zoom_worthy": True},
                    {"part_index": 2, "plain_words": "The starting point", "identity": "one", "zoom_worthy": False},
                    {"part_index": 4, "plain_words": "Where the sum lands", "identity": "zero", "zoom_worthy": False},
                ],
                "derivation_or_motivation": "Offline stand-in formula: a fixed example so the chain can rehearse without a model.",
                "common_misreading": "Taking an offline rehearsal for a real explanation of the topic.",
            }
        ],
        "color_identity": {"key term": "#d97757", "one": "#6a9bcc", "zero": "#788c5d", "text": "#faf9f5"},
        "numbers": [{"name": "zoom", "value": 2.2}, {"name": "run_time", "value": 1.0}],
    }


def _shot_list(topic: str) -> dict:
    verbs = [
        ("HEADLINE", "title", {"run_time": 0.8}, None),
        ("SHOW", "formula", {"run_time": 1.0}, "The offline formula, in coloured parts"),
        ("CAPTION", "formula", {"run_time": 0.5}, "An offline stand-in: no model was called"),
        ("ZOOM_IN", "formula[0]", {"zoom": 2.2, "run_time": 1.0}, "The key term, up close"),
        ("BEAT", None, {"run_time": 0.6}, None),
        ("PULL_BACK", "frame", {"zoom": 1.0, "run_time": 0.8}, None),
        ("BEAT", None, {"run_time": 0.6}, None),
        ("TRANSFORM", "formula", {"run_time": 0.6}, None),
    ]
    shots = [
        {"beat": n, "act_number": min(3, 1 + n // 3), "verb": verb, "target": target, "params": params,
         "caption_text": caption, "formula_id": "f1" if target and "formula" in target else None,
         "part_index": 0 if verb == "ZOOM_IN" else None, "seconds": params["run_time"] + 0.2}
        for n, (verb, target, params, caption) in enumerate(verbs, start=1)
    ]
    return {"offline": True, "topic": topic, "shots": shots,
            "camera_score": "Offline rehearsal: still, one zoom into the key term, one pull-back."}


def _scene_spec(topic: str) -> dict:
    return {
        "offline": True,
        "topic": topic,
        "scene_name": OFFLINE_SCENE_NAME,
        "scene_class": "ThreeDScene",
        "palette": {"background": "#0c0c0b", "text": "#faf9f5", "coral": "#d97757", "blue": "#6a9bcc",
                    "olive": "#788c5d", "gold": "#d4a27f", "gray": "#b0aea5"},
        "objects": [
            {"id": "title", "kind": "Text", "spec": {"font_size": 64}},
            {"id": "formula", "kind": "MathTex", "spec": {"parts": ["e^{i\\pi}", "+", "1", "=", "0"]}},
            {"id": "caption", "kind": "Text", "spec": {"font_size": 30, "fixed_in_frame": True}},
        ],
        "timeline": ["headline", "formula", "caption", "zoom in", "pull back", "fade out"],
        "constraints": ["Manim CE only", "camera via move_camera", "offline stand-in"],
        "acceptance": ["headline first", "formula captioned", "one zoom and pull-back", "palette only",
                       "renders in seconds"],
    }


_BUILDERS = {
    "intent": _intent,
    "cartographer": _knowledge_map,
    "curriculum": _curriculum,
    "math-director": _math_dossier,
    "cinematographer": _shot_list,
    "scene-composer": _scene_spec,
}


def offline_artifact(key: str, topic: str) -> dict:
    """The offline artifact for stage `key` (valid and non-degenerate under validate_artifact)."""
    try:
        return _BUILDERS[key](topic)
    except KeyError:
        raise KeyError(f"no offline stand-in for stage {key!r}; known: {', '.join(_BUILDERS)}") from None


def _safe_title(topic: str) -> str:
    """The topic reduced to plain printable ASCII so it is safe inside Text()."""
    cleaned = re.sub(r"[^A-Za-z0-9 ,.'?!-]+", " ", topic).strip()
    return re.sub(r"\s+", " ", cleaned)[:40] or "Mythos"


def offline_scene(topic: str = _DEFAULT_TOPIC) -> str:
    """A small working film in split form: a shared header and three short scenes (a few
    seconds each at -ql), used for codegen; each scene re-creates its starting state."""
    title = json.dumps(_safe_title(topic))
    opening = json.dumps(f"An offline rehearsal of a film about {_safe_title(topic)}.")
    return f'''from manim import *
from mythloop.scenekit import CaptionLane, end_scene, fit, zoom_to_fit

# Offline stand-in film: written by mythloop.mythos.standins.offline, not by a model.
BG = "#0c0c0b"
INK = "#faf9f5"
CORAL = "#d97757"
BLUE = "#6a9bcc"
OLIVE = "#788c5d"
GRAY = "#b0aea5"
TOPIC = {title}


class {OFFLINE_SCENE_NAME}Base(ThreeDScene):
    """Shared set-up and helpers of every offline scene."""

    def open_scene(self):
        self.camera.background_color = BG
        self.set_camera_orientation(phi=0 * DEGREES, theta=-90 * DEGREES)
        self.lane = CaptionLane(self, font_size=30, color=GRAY)

    def pinned(self, mob):
        self.add_fixed_in_frame_mobjects(mob)
        self.remove(mob)
        return mob

    def parked_title(self):
        """The title as earlier scenes leave it: small, at the top (declared state)."""
        title = self.pinned(Text(TOPIC, font_size=64, color=INK))
        if title.width > 12:
            title.scale_to_fit_width(12)
        title.scale(0.5).to_edge(UP)
        return title

    def formula(self):
        formula = MathTex(r"e^{{i\\pi}}", "+", "1", "=", "0", font_size=72, color=INK)
        formula[0].set_color(CORAL)
        formula[2].set_color(BLUE)
        formula[4].set_color(OLIVE)
        return fit(formula)


class {OFFLINE_SCENE_NAME}01Question({OFFLINE_SCENE_NAME}Base):
    """Scene 1: the headline."""

    NARRATION = {opening}

    def construct(self):
        self.open_scene()
        title = self.pinned(Text(TOPIC, font_size=64, color=INK))
        if title.width > 12:
            title.scale_to_fit_width(12)
        self.play(FadeIn(title), run_time=0.8)
        self.wait(0.6)
        self.play(title.animate.scale(0.5).to_edge(UP), run_time=0.6)
        end_scene(self, self.lane, keep=[title])  # scene 2 starts from the parked title


class {OFFLINE_SCENE_NAME}02Formula({OFFLINE_SCENE_NAME}Base):
    """Scene 2: the formula, captioned (starts from the parked title)."""

    NARRATION = "Here is the formula, part by part. A stand-in wrote it, not a model."

    def construct(self):
        self.open_scene()
        title = self.parked_title()
        self.add(title)
        formula = self.formula()
        self.play(Write(formula), run_time=1.0)
        self.lane.show("Here is the formula, part by part.")  # its captions: its lines
        self.wait(0.6)
        self.lane.show("A stand-in wrote it, not a model.")
        self.wait(0.6)
        end_scene(self, self.lane, keep=[title, formula])  # scene 3 starts from both


class {OFFLINE_SCENE_NAME}03KeyTerm({OFFLINE_SCENE_NAME}Base):
    """Scene 3: zoom into the key term and pull back (starts from scene 2's last frame)."""

    NARRATION = "Look closely at its first term, then see the whole formula again."

    def construct(self):
        self.open_scene()
        title = self.parked_title()
        formula = self.formula()
        self.add(title, formula)
        self.lane.show("Look closely at its first term,")  # one line over two captions
        zoom_to_fit(self, formula, focus=formula[0], max_zoom=2.2, run_time=1.0)
        self.wait(0.6)
        self.lane.show("then see the whole formula again.")
        zoom_to_fit(self, formula, zoom=1, run_time=0.8)
        end_scene(self, self.lane, keep=[title, formula])  # the film ends on its formula
'''


_FAILING = re.compile(r"FAILING SCENE \([^)]*\):\n(.*?)\n\nFAILURE OUTPUT", re.S)


def offline_repair(prompt: str) -> str:
    """The offline 'repair': the failing scene class handed back unchanged (no model)."""
    found = _FAILING.search(prompt or "")
    return found.group(1).strip("\n") + "\n" if found else offline_scene(topic_from_prompt(prompt))


def offline_response(key: str, prompt: str) -> str:
    """Deterministic raw 'model text' for `key`: stage JSON, or a fenced python block for code."""
    topic = topic_from_prompt(prompt)
    if key.startswith("repair"):
        return "```python\n" + offline_repair(prompt) + "```\n"
    if key == "codegen":
        return "```python\n" + offline_scene(topic) + "```\n"
    return json.dumps(offline_artifact(key, topic), indent=2)


@register_backend("offline")
class OfflineBackend(Backend):
    """Answers each film step with fixed text; needs no login, no network."""

    name = "offline"
    default_model = "offline-stand-in"

    def complete(
        self,
        prompt: str,
        *,
        system: str | None = None,
        model: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        key: str | None = None,
    ) -> Completion:
        """The stand-in for step `key` ('intent', ..., 'codegen', 'repair-scene-NN-K')."""
        if not key:
            raise BackendError("offline: complete() needs key= (the step name, e.g. 'intent')")
        started = time.monotonic()
        text = offline_response(key, prompt)
        if not text or not text.strip():
            raise EmptyOutput(f"offline: no stand-in text for key {key!r}")
        return Completion(
            text=text,
            model=self.default_model,
            elapsed_s=time.monotonic() - started,
            raw=text,
            backend=self.name,
            simulated=False,
        )
