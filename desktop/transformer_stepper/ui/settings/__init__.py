"""User preferences: the memory budgets."""
