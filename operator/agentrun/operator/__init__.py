"""The Kubernetes side of agentrun: the AgentRun resource's models and, on top, the operator.

It lives inside the kit's package but the kit never imports it, and this package's own modules
that need kopf or a Kubernetes client import them themselves, so ``import agentrun`` keeps
working without either installed.
"""
