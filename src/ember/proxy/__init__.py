"""The local proxy: serve, forward, tee; features plug in as pipeline stages."""

from ember.proxy.app import ProxyApp
from ember.proxy.pipeline import Exchange, Outcome, Pipeline, Stage

__all__ = ["Exchange", "Outcome", "Pipeline", "ProxyApp", "Stage"]
