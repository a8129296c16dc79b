/** Compile-time assertions for the type tests: `expectType<Equal<A, B>>(true)` fails to compile unless A and B are the same type. */
export type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

export function expectType<T extends true>(value: T): T {
  return value;
}
