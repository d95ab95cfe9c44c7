"""Service settings, read from the environment (HOST, PORT, ...)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(8000, gt=0, lt=65536)
    log_level: str = "info"
