"""The source registry (curation/sources/__init__.py): every kind resolves to a module that keeps the Source contract."""
from __future__ import annotations

def test_every_registered_source_keeps_the_source_contract():
    """Each kind in the registry imports, has iter_documents (curation.sources.Source) and, where it declares
    aggregations, the scan and merge that the Ray job runs on the workers."""
    from curation.sources import SOURCE_MODULES, Source, source_module

    for kind in SOURCE_MODULES:
        assert isinstance(source_module(kind), Source), kind
    assert hasattr(source_module("stackexchange"), "aggregation_merge")
