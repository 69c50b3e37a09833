"""`distrun ui`: a local web page over distrun's jobs (Starlette + Jinja2 + htmx, no build step).

Needs the `ui` extra (`pip install "distrun[ui]"`); nothing here is imported by `distrun run`.
"""
