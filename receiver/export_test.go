package receiver

// HeaderBytes is what a request's header list costs of the budget.
var HeaderBytes = headerBytes
