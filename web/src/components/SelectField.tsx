/** A choice: a value, shown as its label (or as itself). */
export type Choice = string | number | { value: string | number; label: string };

/**
 * A labelled select of a filter row. With allLabel, an empty choice comes first; a value that is not
 * among the choices (from a link) stays choosable as itself.
 */
export function SelectField({
  id,
  label,
  value,
  choices,
  allLabel,
  inline,
  onChange,
}: {
  id: string;
  label: string;
  value: string | number;
  choices: readonly Choice[];
  allLabel?: string;
  inline?: boolean;
  onChange: (value: string) => void;
}) {
  const opts = choices.map((c) => (typeof c === 'object' ? c : { value: c, label: String(c) }));
  const known = value === '' || opts.some((o) => String(o.value) === String(value));
  return (
    <div className={inline ? 'field field-inline' : 'field'}>
      <label htmlFor={id}>{label}</label>
      <select id={id} value={value} onChange={(e) => onChange(e.target.value)}>
        {allLabel !== undefined && <option value="">{allLabel}</option>}
        {opts.map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
        {!known && <option value={value}>{value}</option>}
      </select>
    </div>
  );
}
