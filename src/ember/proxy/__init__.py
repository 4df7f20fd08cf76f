"""The local proxy: serve, forward, tee; features plug in as pipeline stages."""

from ember.exchange import Exchange, Outcome, Stage
from ember.proxy.app import ProxyApp
from ember.proxy.pipeline import Pipeline

__all__ = ["Exchange", "Outcome", "Pipeline", "ProxyApp", "Stage"]
