"""``ctxmt serve``: an HTTP JSON translation server that keeps each document's context between requests.

- :mod:`~ctxmt_cli.serve.documents`: what is kept per document (the earlier sentences the model reads, with their
  translations' token ids), at most ``max_documents`` documents, the least recently used evicted;
- :mod:`~ctxmt_cli.serve.engine`: one batch of requests as one :meth:`ctxmt_cli.api.Model.translate` call;
- :mod:`~ctxmt_cli.serve.batcher`: the worker thread that gathers requests for different documents into batches;
- :mod:`~ctxmt_cli.serve.app`: the Starlette application (routes, request checks, JSON errors);
- :mod:`~ctxmt_cli.serve.server`: running it with uvicorn on a socket of ours (foreground or a background thread).

Importing these modules imports neither torch nor Starlette nor uvicorn: the functions that need them do.
"""

#: what a missing Starlette or uvicorn tells the user
INSTALL_HINT = "pip install 'ctxmt[serve]' (or pip install starlette uvicorn)"
