/** Every user-facing text of the API, in Spanish as CONTRACT.md gives them. */
export const messages = {
  fields: {
    username: {
      missing: 'El username es obligatorio',
      type: 'El username debe ser un texto',
      length: 'El username debe tener entre 3 y 20 caracteres',
      format: 'El username no puede contener caracteres de control',
      spaces: 'El username no puede empezar ni terminar con espacios'
    },
    email: {
      missing: 'El email es obligatorio',
      type: 'El email debe ser un texto',
      length: 'El email debe ser valido',
      format: 'El email debe ser valido'
    },
    password: {
      missing: 'La password es obligatoria',
      type: 'La password debe ser un texto',
      length: 'La password debe tener entre 8 y 16 caracteres',
      format: 'La password debe tener al menos una numero, una letra minuscula y una letra mayuscula'
    }
  },
  duplicate: {
    email: 'El email ya está registrado',
    username: 'El username ya está en uso'
  },
  bodyMissing: 'El cuerpo de la petición es obligatorio',
  bodyMalformed: 'El cuerpo de la petición no es un JSON válido',
  bodyNotObject: 'El cuerpo de la petición debe ser un objeto JSON',
  bodyTooLarge: 'El cuerpo de la petición es demasiado grande',
  unsupportedMediaType: 'Tipo de contenido no soportado',
  notFound: 'Recurso no encontrado',
  internal: 'Error interno del servidor',
  unavailable: 'Servicio no disponible',
  badCredentials: 'Credenciales inválidas',
  tokenMissing: 'Token ausente',
  tokenInvalid: 'Token inválido',
  tokenExpired: 'Token expirado',
  forbidden: 'Acceso denegado',
  tooManyAttempts: 'Demasiados intentos, inténtelo más tarde',
  invalidRequest: 'Petición no válida',
  requestTimeout: 'La petición tardó demasiado en llegar',
  headersTooLarge: 'Las cabeceras de la petición son demasiado grandes'
} as const

export type ValidatedField = keyof typeof messages.fields
/** The rules of CONTRACT §4, in the order in which the first failing one wins; only usernames have `spaces`. */
export const FIELD_RULES = ['missing', 'type', 'length', 'format', 'spaces'] as const
export type FieldRule = typeof FIELD_RULES[number]
