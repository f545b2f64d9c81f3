/**
 * The text of a VALUES list of numbered parameters, for the statements that write or match
 * many rows at once (a batch's UPDATE … FROM (VALUES …), a multi-row INSERT with SQL-side
 * defaults): one place for the numbering, `$1` … `$rows × columns`, row after row. The api
 * server's stores and the guardian's store share it.
 *
 * @since 0.7.0
 */

/**
 * `rows` rows of one placeholder per entry of `casts`, each followed by its cast (`""` for none),
 * then `tail` inside each row: `valuesPlaceholders(2, ["::text", ""])` is `($1::text, $2), ($3::text, $4)`.
 * A parameter in a VALUES list of UPDATE … FROM has no target column to take its type from, so a
 * column compared with or written to anything but text needs its cast.
 *
 * @since 0.7.0
 * @category constructors
 */
export const valuesPlaceholders = (rows: number, casts: ReadonlyArray<string>, tail = ""): string =>
  Array.from({ length: rows }, (_, row) =>
    `(${casts.map((cast, column) => `$${row * casts.length + column + 1}${cast}`).join(", ")}${tail})`
  ).join(", ")
