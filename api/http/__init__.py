"""The HTTP service: the FastAPI app (app.py) with its thin routes (routes.py), the edge's
bounds (middleware.py: bodies, admission, in flight), the solver pool and cache
(workers.py), settings from the environment (settings.py), metrics, JSON logs, the OpenAPI
document (openapi.py), and `layoutopt serve` with its drain on SIGTERM (serve.py)."""

from api.http.app import app, create_app, drain
from api.http.serve import serve
from api.http.settings import Settings

__all__ = ["Settings", "app", "create_app", "drain", "serve"]
