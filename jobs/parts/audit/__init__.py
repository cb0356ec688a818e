"""The corpus audits' parts: `audit`'s snippets, results and accounting, its reference-corpus overlap, dataset inference's CoDeC, the canary test's scoring."""
