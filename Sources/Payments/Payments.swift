// Payments: the exactly-once payment state machine and processor protocol (pure).
