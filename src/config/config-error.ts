/** A configuration that cannot run; its message is the single line the process prints. */
export class ConfigError extends Error {
  constructor (variable: string, problem: string) {
    super(`Invalid configuration: ${variable} ${problem}`)
    this.name = 'ConfigError'
  }
}
