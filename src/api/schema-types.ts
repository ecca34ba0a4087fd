import type { FastifyTypeProvider } from 'fastify';

/**
 * The TypeScript type of a request's JSON Schema (`as const`), so a route's params, query,
 * headers and body are typed by the schema that validates them and by nothing written beside
 * it. Covers what the shop API's request schemas use: strings (with `enum`), numbers, booleans,
 * `nullable`, and objects of `properties` (`required`, or with a `default`: present after
 * validation) or of `additionalProperties`. Anything else is `unknown`.
 */
export type FromSchema<S> = S extends { readonly nullable: true } ? FromType<S> | null : FromType<S>;

type FromType<S> = S extends { readonly enum: readonly (infer E)[] }
  ? E
  : S extends { readonly type: 'string' }
    ? string
    : S extends { readonly type: 'integer' | 'number' }
      ? number
      : S extends { readonly type: 'boolean' }
        ? boolean
        : S extends { readonly type: 'object'; readonly properties: infer P }
          ? ObjectOf<P, RequiredKeys<S> | DefaultedKeys<P>>
          : S extends { readonly type: 'object'; readonly additionalProperties: infer A }
            ? Record<string, FromSchema<A>>
            : unknown;

type RequiredKeys<S> = S extends { readonly required: readonly (infer K)[] } ? K : never;
type DefaultedKeys<P> = { [K in keyof P]: P[K] extends { readonly default: unknown } ? K : never }[keyof P];
type ObjectOf<P, R> = {
  -readonly [K in keyof P as K extends R ? K : never]: FromSchema<P[K]>;
} & { -readonly [K in keyof P as K extends R ? never : K]?: FromSchema<P[K]> };

/**
 * The Fastify type provider of {@link FromSchema}: `app.withTypeProvider<SchemaTypes>()` types a
 * route's request from its schema. Answers are not typed here: their schemas serialise them, and
 * the API test compares the order's schema with the public representation.
 */
export interface SchemaTypes extends FastifyTypeProvider {
  validator: FromSchema<this['schema']>;
  serializer: unknown;
}
