/** A failure the operator can fix: its message is printed as is, and the exit code is 1. */
export class CliError extends Error {}
/** The command's arguments are not what it takes: the message, then the usage, is printed. */
export class UsageError extends CliError {}
