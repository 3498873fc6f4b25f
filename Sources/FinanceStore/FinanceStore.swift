// FinanceStore: the FinanceKit-shaped transaction model (pure).
