// Reconciliation: settlement report parsing and matching (pure).
