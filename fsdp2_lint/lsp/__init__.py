"""The language server behind ``fsdp2-lint lsp`` (needs the ``lsp`` extra: pygls)."""
