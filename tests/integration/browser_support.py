"""Drive the Prefect 3.8.8 UI in headless Chromium with Playwright, for end-to-end tests.

What this covers, checked by hand against a local ``prefect server start`` (see the
``if __name__ == "__main__"`` block at the end for a runnable demo):

* open a flow run's page (``/runs/flow-run/<id>`` in the V1 UI, ``/v2/runs/flow-run/<id>`` in V2);
* read a markdown artifact's rendered text (``/artifacts/artifact/<id>``; the flow run page only
  lists artifacts as cards, and ``/artifacts/key/<key>`` is only a timeline of versions);
* open the *Resume* form that Prefect builds from a ``prefect.input.RunInput`` model, fill its
  fields (text areas, ``Literal`` selects), submit it and check that the server accepted it;
* save screenshots.

Browser: Debian's ``chromium`` package (``apt-get install -y chromium``); Playwright's own browser
download is not needed. The Prefect server must be started with ``PREFECT_UI_API_URL`` pointing at
its own API (``http://127.0.0.1:PORT/api``) when it is not on port 4200, or the UI cannot reach it.

The module imports without Playwright installed: Playwright is imported inside the functions, and
:func:`skip_reason` says why browser tests cannot run, for ``pytest.skip``.

Typical use::

    from playwright.sync_api import sync_playwright
    import browser_support as bs

    if (why := bs.skip_reason()):
        pytest.skip(why)
    with sync_playwright() as pw:
        browser = bs.launch(pw)
        page = bs.new_page(browser)
        bs.open_flow_run(page, ui_url, run_id)
        assert "SOP" in bs.artifact_text(page, ui_url, run_id, key="r-xxx-sop-review")
        bs.resume_with(page, ui_url, run_id, {"decision": "reject", "feedback": "too vague"},
                       screenshot_to=tmp_path / "resume.png")
        browser.close()
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from playwright.sync_api import Browser, Locator, Page, Playwright

#: Flags Debian's Chromium needs to run headless as root in a container, without calling home. No WebGL:
#: the flow run page's run graph draws with it, in software here, and kept the renderer on a whole core of
#: the two while the page was open (measured: 69 CPU-s for the two browser tests, 16 without it and with
#: :func:`park`). The graph's panel stays empty; the rest of the page, the Resume form included, is the same.
CHROMIUM_ARGS: tuple[str, ...] = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-3d-apis",
)
#: Executable names tried by :func:`chromium_path`, in order.
CHROMIUM_NAMES: tuple[str, ...] = ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome")
#: Default time to wait for one thing on the page (milliseconds).
DEFAULT_TIMEOUT_MS = 30_000
_RESUME_POST = re.compile(r"/api/flow_runs/[0-9a-f-]{36}/resume$")
_PAUSED_STATES = frozenset({"Paused", "Suspended"})
_FINAL_STATES = frozenset({"Completed", "Failed", "Crashed", "Cancelled", "TimedOut"})
#: The two UIs Prefect 3.8 serves: V1 (Vue) at ``/`` and V2 (React) at ``/v2``.
UI_PREFIX = {"v1": "", "v2": "/v2"}

# Controls a schema-form field can have: text areas/inputs, a native select, the V1 select button,
# the V2 select (a popover button announcing a listbox).
_CONTROL_CSS = ("textarea, input:not([type=search]):not([type=hidden]), select, "
                "button[aria-haspopup=listbox], button.p-select-button__control")
_CONTROL_XPATH = ("ancestor::*[.//textarea or .//input[not(@type='search') and not(@type='hidden')]"
                  " or .//select or .//button[@aria-haspopup='listbox']"
                  " or .//button[contains(@class,'p-select-button__control')]][1]")


class UiError(AssertionError):
    """Something expected on a Prefect UI page was not found (the message says what and where)."""


# --------------------------------------------------------------------------- browser


def playwright_available() -> bool:
    """True when the ``playwright`` Python package can be imported."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return True


def chromium_path() -> str | None:
    """Path of a Chromium executable: ``$SOPFORGE_CHROMIUM`` if set, else the first on ``PATH``."""
    explicit = os.environ.get("SOPFORGE_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def skip_reason() -> str | None:
    """Why browser tests cannot run here (for ``pytest.skip``), or None when they can."""
    if not playwright_available():
        return "playwright is not installed (pip install playwright)"
    if chromium_path() is None:
        return "no chromium executable on PATH (apt-get install -y chromium)"
    return None


def launch(playwright: Playwright, *, headless: bool = True, extra_args: tuple[str, ...] = ()) -> Browser:
    """Launch the system Chromium (see :func:`chromium_path`) with :data:`CHROMIUM_ARGS`."""
    path = chromium_path()
    if path is None:
        raise UiError("no chromium executable found: apt-get install -y chromium, or set SOPFORGE_CHROMIUM")
    return playwright.chromium.launch(executable_path=path, headless=headless,
                                      args=[*CHROMIUM_ARGS, *extra_args])


def new_page(browser: Browser, *, width: int = 1400, height: int = 1000,
             timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Page:
    """A page in a fresh context, with a desktop viewport and ``timeout_ms`` as default timeout."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(timeout_ms)
    return page


def screenshot(page: Page, path: str | os.PathLike[str], *, full_page: bool = True) -> Path:
    """Save a PNG of the page (creating parent folders) and return its path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out), full_page=full_page)
    return out


def park(page: Page) -> None:
    """Leave the page for ``about:blank`` while the test waits for the flow.

    A flow run page keeps working while it is open (its run graph redraws, its logs and states are
    polled): measured here, Chromium's renderer then takes a whole core of the two.
    """
    page.goto("about:blank")


# --------------------------------------------------------------------------- URLs and waiting


def ui_root(ui_url: str) -> str:
    """The UI's root URL; accepts the server root or its API URL (``.../api``)."""
    root = ui_url.rstrip("/")
    if root.endswith("/api"):
        root = root[: -len("/api")]
    return root


def flow_run_url(ui_url: str, flow_run_id: str, *, ui: str = "v1") -> str:
    """URL of a flow run's page (the one Prefect logs as 'View at ...' is the V1 one)."""
    return f"{ui_root(ui_url)}{_prefix(ui)}/runs/flow-run/{flow_run_id}"


def artifact_url(ui_url: str, artifact_id: str, *, ui: str = "v1") -> str:
    """URL of one artifact version's page, where its markdown is rendered."""
    return f"{ui_root(ui_url)}{_prefix(ui)}/artifacts/artifact/{artifact_id}"


def artifact_key_url(ui_url: str, key: str, *, ui: str = "v1") -> str:
    """URL of an artifact key's page: a timeline of its versions with links to each one."""
    return f"{ui_root(ui_url)}{_prefix(ui)}/artifacts/key/{key}"


def wait_for_text(page_or_locator: Page | Locator, text: str | re.Pattern[str], *,
                  timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Locator:
    """Wait until ``text`` (substring, or regex) is visible; return its locator.

    Whitespace is normalised the way Playwright's ``get_by_text`` does, so match one line of a
    multi-line text, not the whole block.
    """
    target = page_or_locator.get_by_text(text).first
    try:
        target.wait_for(state="visible", timeout=timeout_ms)
    except Exception as exc:  # playwright TimeoutError
        raise UiError(f"text {text!r} not visible after {timeout_ms} ms on {_where(page_or_locator)};"
                      f" visible text starts: {_snippet(page_or_locator)!r}") from exc
    return target


def open_flow_run(page: Page, ui_url: str, flow_run_id: str, *, ui: str = "v1",
                  timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
    """Go to the flow run's page and wait until it has rendered (its tab list is visible)."""
    page.goto(flow_run_url(ui_url, flow_run_id, ui=ui), wait_until="domcontentloaded", timeout=timeout_ms)
    _wait_flow_run_ready(page, flow_run_id, timeout_ms)


def flow_run_state(page: Page) -> str:
    """The state name the flow run page shows (e.g. 'Paused', 'Running', 'Completed'), or ''."""
    header = page.locator(".page-heading, main, body").first
    text = header.inner_text(timeout=5_000)
    for name in ("Paused", "Suspended", "Running", "Completed", "Failed", "Crashed", "Cancelled",
                 "Cancelling", "Pending", "Scheduled", "Late", "AwaitingRetry", "Retrying", "TimedOut"):
        if re.search(rf"(?m)^{name}$", text):
            return name
    return ""


def wait_for_resume_available(page: Page, ui_url: str, flow_run_id: str, *, ui: str = "v1",
                              timeout_ms: int = 60_000, reload_every_s: float = 3.0) -> None:
    """Reload the flow run page until it offers *Resume* (the run has paused).

    The flow run page does not notice a state change at once, so a test that opens it right after
    starting the flow may see 'Running' for a while: this reloads until the run is paused.
    """
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        open_flow_run(page, ui_url, flow_run_id, ui=ui, timeout_ms=max(5_000, int(timeout_ms / 2)))
        if _resume_entry(page, wait_ms=int(reload_every_s * 1000), open_menu=False) is not None:
            return
        state = flow_run_state(page)
        if state in _FINAL_STATES:
            raise UiError(f"flow run {flow_run_id} is {state}: it will never offer Resume ({page.url})")
        if time.monotonic() >= deadline:
            raise UiError(f"flow run {flow_run_id} offers no Resume after {timeout_ms} ms"
                          f" (state shown: {flow_run_state(page) or 'unknown'}) at {page.url}")


# --------------------------------------------------------------------------- artifacts


# Links to an artifact: V1's cards open one version (/artifacts/artifact/<id>), V2's cards open the
# key's page (/artifacts/key/<key>), which links each version.
_ARTIFACT_LINKS = "a[href*='/artifacts/artifact/'], a[href*='/artifacts/key/']"
# Where the rendered artifact is: V1 `.artifact-data-view`; V2 the active tab panel ("Artifact").
_ARTIFACT_BODY = ".artifact-data-view, [role=tabpanel][data-state=active]"


def open_artifacts_tab(page: Page, *, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> list[tuple[str, str]]:
    """On a flow run page, show the *Artifacts* tab; return ``(card text, href)`` for each artifact card.

    Cards appear only once their data has loaded, so this waits for at least one.
    """
    tab = page.get_by_role("tablist").first.get_by_text("Artifacts", exact=True)
    try:
        tab.click(timeout=timeout_ms)
    except Exception as exc:
        raise UiError(f"no 'Artifacts' tab on {page.url}") from exc
    links = _artifact_cards(page)
    try:
        links.first.wait_for(state="visible", timeout=timeout_ms)
    except Exception as exc:
        raise UiError(f"the Artifacts tab of {page.url} lists no artifact after {timeout_ms} ms;"
                      f" text: {_snippet(page)!r}") from exc
    return [(link.inner_text(), link.get_attribute("href") or "") for link in links.all()]


def artifact_text(page: Page, ui_url: str, flow_run_id_or_key: str, *, key: str | None = None,
                  ui: str = "v1", timeout_ms: int = DEFAULT_TIMEOUT_MS) -> str:
    """Open a markdown artifact's page and return its rendered text.

    ``flow_run_id_or_key`` is a flow run id (a UUID) or an artifact key:

    * run id and ``key``: checks that the run's Artifacts tab shows ``key``, then opens the newest
      version of ``key`` created by that run (from the key's page, which lists versions newest
      first; the run's tab does not order them);
    * run id alone: opens the first card of the run's Artifacts tab (any order: pass ``key``);
    * key: opens the key's newest version.

    The page is left on the artifact, so a screenshot shows it rendered.
    """
    run_id = flow_run_id_or_key if _is_uuid(flow_run_id_or_key) else None
    if run_id is None:
        page.goto(artifact_key_url(ui_url, flow_run_id_or_key, ui=ui), wait_until="domcontentloaded")
    else:
        open_flow_run(page, ui_url, run_id, ui=ui, timeout_ms=timeout_ms)
        cards = open_artifacts_tab(page, timeout_ms=timeout_ms)
        if key is None:
            _artifact_cards(page).first.click()
        else:
            if _artifact_cards(page).filter(has=page.get_by_text(key, exact=True)).count() == 0:
                shown = [" ".join(card.split()) for card, _ in cards]
                raise UiError(f"no artifact with key {key!r} on flow run {run_id}; cards: {shown}")
            page.goto(artifact_key_url(ui_url, key, ui=ui), wait_until="domcontentloaded")
        page.wait_for_url(re.compile(r"/artifacts/(artifact|key)/"), timeout=timeout_ms)
    if "/artifacts/key/" in page.url:
        _open_newest_version(page, run_id, timeout_ms)
    body = page.locator(_ARTIFACT_BODY).first
    try:
        body.wait_for(state="visible", timeout=timeout_ms)
        # The markdown renders after the artifact is fetched: wait until it has some text.
        page.wait_for_function("el => el.innerText.trim().length > 0", arg=body.element_handle(),
                               timeout=timeout_ms)
    except Exception as exc:
        raise UiError(f"artifact page {page.url} shows no content after {timeout_ms} ms;"
                      f" text: {_snippet(page)!r}") from exc
    return body.inner_text()


def _open_newest_version(page: Page, flow_run_id: str | None, timeout_ms: int) -> None:
    """On an artifact key's page (versions newest first), open the newest one (of ``flow_run_id``)."""
    versions = page.locator("a[href*='/artifacts/artifact/']")
    try:
        versions.first.wait_for(state="visible", timeout=timeout_ms)
    except Exception as exc:
        raise UiError(f"artifact key page {page.url} links no artifact version after {timeout_ms} ms;"
                      f" text: {_snippet(page)!r}") from exc
    if flow_run_id is not None:
        # A version link whose nearest enclosing block with a flow-run link links this run.
        versions = page.locator(
            "xpath=//a[contains(@href,'/artifacts/artifact/')]"
            "[(ancestor::*[.//a[contains(@href,'/runs/flow-run/')]])[last()]"
            f"//a[contains(@href,'/runs/flow-run/{flow_run_id}')]]")
        try:  # the flow run links render after the versions (their names are fetched one by one)
            versions.first.wait_for(state="visible", timeout=timeout_ms)
        except Exception as exc:
            raise UiError(f"artifact key page {page.url} lists no version from flow run {flow_run_id}"
                          f" after {timeout_ms} ms") from exc
    versions.first.click()
    page.wait_for_url(re.compile(r"/artifacts/artifact/[0-9a-f-]{36}"), timeout=timeout_ms)


def _artifact_cards(page: Page) -> Locator:
    return page.locator(_ARTIFACT_LINKS)


# --------------------------------------------------------------------------- resume form


def open_resume_form(page: Page, *, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Locator:
    """On a paused flow run's page, open the *Resume* dialog and return it.

    The dialog shows the ``description`` given to ``RunInput.with_initial_data`` (rendered as
    markdown) above one field per model field.
    """
    entry = _resume_entry(page, wait_ms=timeout_ms)
    if entry is None:
        raise UiError(f"no Resume button on {page.url} (state shown: {flow_run_state(page) or 'unknown'});"
                      " is the flow run paused? see wait_for_resume_available()")
    entry.click()
    dialog = page.get_by_role("dialog").filter(has_text="Resume Flow Run")
    try:
        dialog.wait_for(state="visible", timeout=timeout_ms)
        dialog.locator(_CONTROL_CSS).first.wait_for(state="visible", timeout=timeout_ms)
    except Exception as exc:
        raise UiError(f"the Resume dialog with its form did not appear on {page.url} after {timeout_ms} ms") from exc
    return dialog


def form_description(dialog: Locator, *, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> str:
    """Text of the markdown description shown above the resume form's fields ('' if none shows).

    That is the ``description`` given to ``RunInput.with_initial_data``; it is rendered as markdown
    (V1: ``article.markdown-renderer``, V2: ``.prose``), so headings and emphasis lose their marks.
    The markdown renders after the fields on a busy machine (it read '' once with the form open),
    so this waits for it rather than reading whatever is there.
    """
    box = dialog.locator("article.markdown-renderer, .prose").filter(has_text=re.compile(r"\S")).first
    try:
        box.wait_for(state="visible", timeout=timeout_ms)
    except Exception:
        return ""
    return box.inner_text()


def form_fields(dialog: Locator) -> list[str]:
    """Labels of the fields in a resume form, as shown (e.g. 'Feedback (Optional)')."""
    return [t.strip() for t in dialog.locator("label").all_inner_texts() if t.strip()]


def field_control(dialog: Locator, name: str) -> Locator:
    """The input of the form field for ``name`` (a model field name like 'edited_artifact' or its label)."""
    wanted = _label_keys(name)
    labels = dialog.locator("label")
    for i, shown in enumerate(labels.all_inner_texts()):
        if _normalise_label(shown) not in wanted:
            continue
        label = labels.nth(i)
        target = label.get_attribute("for")
        if target:
            by_id = dialog.locator(f"[id='{target}']")
            if by_id.count() == 1 and by_id.evaluate("(e, css) => e.matches(css)", _CONTROL_CSS):
                return by_id
        control = label.locator(f"xpath={_CONTROL_XPATH}").locator(_CONTROL_CSS).first
        if control.count():
            return control
        raise UiError(f"field {name!r} has a label but no input this helper knows in the resume form")
    raise UiError(f"no field {name!r} in the resume form; fields: {form_fields(dialog)}")


def fill_field(page: Page, dialog: Locator, name: str, value: Any, *,
               timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
    """Set one resume-form field: type into a text field, or choose an option of a select."""
    control = field_control(dialog, name)
    text = "" if value is None else str(value)
    tag = control.evaluate("e => e.tagName.toLowerCase()")
    if tag in ("textarea", "input"):
        control.fill(text, timeout=timeout_ms)
        got = control.input_value()
        if got != text:
            raise UiError(f"field {name!r} holds {got!r} after typing {text!r}")
        return
    if tag == "select":
        control.select_option(label=text, timeout=timeout_ms)
        return
    _choose_option(page, control, name, text, timeout_ms)


def fill_resume_form(page: Page, dialog: Locator, values: Mapping[str, Any], *,
                     timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
    """Fill several fields, e.g. ``{"decision": "reject", "feedback": "Step 2 is wrong"}``."""
    for name, value in values.items():
        fill_field(page, dialog, name, value, timeout_ms=timeout_ms)


def submit_resume_form(page: Page, dialog: Locator, *, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> dict[str, Any]:
    """Press the dialog's submit button; return the server's answer once it accepted the input.

    Waits for ``POST /api/flow_runs/<id>/resume``; raises :class:`UiError` when the server does
    not answer ``ACCEPT`` (e.g. the input failed validation) or when the dialog stays open.
    """
    button = dialog.get_by_role("button", name=re.compile(r"^\s*(Submit|Resume)\s*$"))
    if button.count() == 0:
        raise UiError(f"no Submit/Resume button in the resume dialog on {page.url}")
    try:
        with page.expect_response(lambda r: r.request.method == "POST" and _RESUME_POST.search(r.url) is not None,
                                  timeout=timeout_ms) as info:
            button.first.click()
        response = info.value
    except Exception as exc:  # no request: the form refused to submit (e.g. a required field is empty)
        raise UiError(f"submitting the resume form sent no resume request within {timeout_ms} ms;"
                      f" the dialog says: {_snippet(dialog, 1200)!r}") from exc
    try:
        answer: dict[str, Any] = response.json()
    except Exception:
        answer = {"status": None, "body": response.text()}
    if not response.ok or answer.get("status") != "ACCEPT":
        said = {k: answer.get(k) for k in ("status", "details", "body") if k in answer}
        raise UiError(f"server did not accept the resume input (HTTP {response.status}): {said}")
    try:
        dialog.wait_for(state="hidden", timeout=timeout_ms)
    except Exception as exc:
        raise UiError(f"the resume dialog stayed open after the server accepted the input on {page.url}") from exc
    return answer


def resume_with(page: Page, ui_url: str, flow_run_id: str, values: Mapping[str, Any], *,
                ui: str = "v1", timeout_ms: int = DEFAULT_TIMEOUT_MS, wait_paused_ms: int = 60_000,
                screenshot_to: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Open the flow run, open its Resume form, fill ``values``, submit; return the server's answer.

    Reloads until the run is paused (``wait_paused_ms``). With ``screenshot_to``, saves the filled
    form just before submitting (the page after submitting is easy to take with :func:`screenshot`).
    """
    wait_for_resume_available(page, ui_url, flow_run_id, ui=ui, timeout_ms=wait_paused_ms)
    dialog = open_resume_form(page, timeout_ms=timeout_ms)
    fill_resume_form(page, dialog, values, timeout_ms=timeout_ms)
    if screenshot_to is not None:
        screenshot(page, screenshot_to, full_page=False)
    return submit_resume_form(page, dialog, timeout_ms=timeout_ms)


# --------------------------------------------------------------------------- internals


def _prefix(ui: str) -> str:
    if ui not in UI_PREFIX:
        raise ValueError(f"ui must be one of {sorted(UI_PREFIX)}, not {ui!r}")
    return UI_PREFIX[ui]


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _wait_flow_run_ready(page: Page, flow_run_id: str, timeout_ms: int) -> None:
    tabs = page.get_by_role("tablist").first
    no_api = page.get_by_text("Can't connect to Server API").first
    missing = page.get_by_text(re.compile(r"^\s*(Page not found|404)\s*$")).first
    try:
        tabs.or_(no_api).or_(missing).first.wait_for(state="visible", timeout=timeout_ms)
    except Exception as exc:
        raise UiError(f"flow run page for {flow_run_id} did not render within {timeout_ms} ms at {page.url};"
                      f" visible text starts: {_snippet(page)!r}") from exc
    if no_api.is_visible():
        raise UiError(f"the UI at {page.url} cannot reach its API ({_snippet(no_api, 200)!r}): start the server"
                      " with PREFECT_UI_API_URL=http://127.0.0.1:PORT/api")
    if not tabs.is_visible():
        raise UiError(f"no flow run page for {flow_run_id} at {page.url}: {_snippet(page)!r}")
    try:
        tabs.get_by_text("Logs", exact=True).wait_for(state="visible", timeout=timeout_ms)
    except Exception as exc:
        raise UiError(f"flow run page for {flow_run_id} shows no 'Logs' tab at {page.url}") from exc


def _resume_entry(page: Page, *, wait_ms: int, open_menu: bool = True) -> Locator | None:
    """The element to click to open the Resume dialog, or None if there is none within ``wait_ms``.

    V1 has a 'Resume' button in the page heading. V2 has a 'Resume' item in the heading's
    'Open menu' menu, offered only while the run is paused; with ``open_menu=False`` the V2 menu is
    left shut and its trigger is returned once the page shows the run paused. Never press Escape
    on a V2 run page: the run graph takes it as 'full screen' and then covers the page.
    """
    deadline = time.monotonic() + wait_ms / 1000
    v1_button = page.get_by_role("button", name="Resume", exact=True)
    v2_menu = page.locator("main").get_by_role("button", name="Open menu").first
    v2_item = page.get_by_role("menuitem", name="Resume", exact=True)
    while True:
        if v1_button.count() and v1_button.first.is_visible():
            return v1_button.first
        if v2_item.count() and v2_item.first.is_visible():  # menu already open
            return v2_item.first
        if ("/v2/" in page.url and v2_menu.count() and v2_menu.is_visible()
                and flow_run_state(page) in _PAUSED_STATES):
            if not open_menu:
                return v2_menu
            v2_menu.click()
            try:
                v2_item.first.wait_for(state="visible", timeout=2_000)
                return v2_item.first
            except Exception:
                v2_menu.click()  # shut it again
        if time.monotonic() >= deadline:
            return None
        page.wait_for_timeout(250)


def _choose_option(page: Page, control: Locator, name: str, text: str, timeout_ms: int) -> None:
    """Pick ``text`` in a custom select (V1: keyboard opens it, a mouse click does not; V2: click)."""
    v1 = bool(control.evaluate("e => e.classList.contains('p-select-button__control')"))
    if v1:
        # V1's PSelect toggles twice on a synthetic click and stays shut; ArrowDown opens it.
        control.focus()
        page.keyboard.press("ArrowDown")
    else:
        control.click()
    listbox = page.get_by_role("listbox").last
    try:
        listbox.get_by_role("option").first.wait_for(state="visible", timeout=timeout_ms)
    except Exception as exc:
        raise UiError(f"the options of field {name!r} did not open") from exc
    option = listbox.get_by_role("option", name=text, exact=True)
    if option.count() == 0:
        shown = [o.strip() for o in listbox.get_by_role("option").all_inner_texts()]
        if v1:
            page.keyboard.press("Escape")
        else:
            control.click()  # shut it (Escape would also reach the V2 run graph)
        raise UiError(f"field {name!r} has no option {text!r}; options: {shown}")
    option.first.click()
    try:
        page.wait_for_function("([el, want]) => el.innerText.trim() === want",
                               arg=[control.element_handle(), text], timeout=timeout_ms)
    except Exception as exc:
        raise UiError(f"field {name!r} shows {control.inner_text().strip()!r} after choosing {text!r}") from exc


def _normalise_label(text: str) -> str:
    text = re.sub(r"\(optional\)|\*", "", text.strip(), flags=re.I)
    return re.sub(r"[\s_]+", " ", text).strip().lower()


def _label_keys(name: str) -> set[str]:
    return {_normalise_label(name), _normalise_label(name.replace("_", " "))}


def _where(target: Page | Locator) -> str:
    page = getattr(target, "page", target)
    return getattr(page, "url", "?")


def _snippet(target: Page | Locator, limit: int = 400) -> str:
    try:
        source = target.locator("body") if hasattr(target, "goto") else target
        return re.sub(r"\s+", " ", source.inner_text(timeout=2_000))[:limit]
    except Exception:
        return "<unreadable>"


if __name__ == "__main__":  # pragma: no cover - manual demo
    import argparse
    import json

    parser = argparse.ArgumentParser(description="Resume a paused Prefect flow run through its UI.")
    parser.add_argument("ui_url", help="e.g. http://127.0.0.1:4200")
    parser.add_argument("flow_run_id")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--artifact-key")
    parser.add_argument("--ui", default="v1", choices=sorted(UI_PREFIX))
    parser.add_argument("--shots", default="/tmp/browser_support_shots")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = launch(pw)
        page = new_page(browser)
        if args.artifact_key:
            print(artifact_text(page, args.ui_url, args.flow_run_id, key=args.artifact_key, ui=args.ui))
            screenshot(page, f"{args.shots}/artifact.png")
        values = dict(item.split("=", 1) for item in args.set)
        print(json.dumps(resume_with(page, args.ui_url, args.flow_run_id, values, ui=args.ui,
                                     screenshot_to=f"{args.shots}/form.png"))[:300])
        screenshot(page, f"{args.shots}/after.png")
        browser.close()
