package receiver

// BudgetChunk is the budget's reservation step, for the tests' arithmetic.
const BudgetChunk = budgetChunk
