"""Wikipedia articles from the MediaWiki API (api) or two multistream dumps (dump, multistream, wikitext)."""
