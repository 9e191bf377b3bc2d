// The shared create form: nothing is sent while the fields are invalid, the button shows the
// request running, a refusal stays on the form, and a success clears it.

import { render, screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { useState } from 'react';
import { describe, expect, it } from 'vitest';
import { CreateForm, useCreate } from './CreateForm';

function NameForm({ create, onCreated }: { create: (name: string) => Promise<string>; onCreated: (name: string) => void }) {
  const [name, setName] = useState('');
  const form = useCreate(
    name.trim() !== '',
    () => create(name.trim()),
    (created) => {
      setName('');
      onCreated(created);
    },
  );
  return (
    <CreateForm titleId="t" title="New thing" submitLabel="Create thing" state={form}>
      <label htmlFor="name">Name</label>
      <input id="name" value={name} onChange={(e) => setName(e.target.value)} />
      {form.touched && name.trim() === '' && <span>A name is required.</span>}
    </CreateForm>
  );
}

describe('CreateForm', () => {
  it('sends nothing while invalid and shows the field errors only after a submit', async () => {
    const calls: string[] = [];
    render(<NameForm create={async (n) => (calls.push(n), n)} onCreated={() => {}} />);
    expect(screen.getByRole('form', { name: 'New thing' })).toBeTruthy();
    expect(screen.queryByText('A name is required.')).toBeNull();
    await userEvent.click(screen.getByRole('button', { name: 'Create thing' }));
    expect(screen.getByText('A name is required.')).toBeTruthy();
    expect(calls).toEqual([]);
  });

  it('shows the request running, then hands the result on and clears the form', async () => {
    let finish: (v: string) => void = () => {};
    const created: string[] = [];
    render(<NameForm create={(n) => new Promise((resolve) => (finish = () => resolve(n)))} onCreated={(n) => created.push(n)} />);
    await userEvent.type(screen.getByLabelText('Name'), ' box ');
    await userEvent.click(screen.getByRole('button', { name: 'Create thing' }));
    const busy = screen.getByRole('button', { name: 'Creating…' }) as HTMLButtonElement;
    expect(busy.disabled).toBe(true);
    finish('box');
    await waitFor(() => expect(created).toEqual(['box']));
    expect((screen.getByLabelText('Name') as HTMLInputElement).value).toBe('');
    expect(screen.queryByText('A name is required.')).toBeNull();
    expect((screen.getByRole('button', { name: 'Create thing' }) as HTMLButtonElement).disabled).toBe(false);
  });

  it('keeps a refusal on the form and the fields as typed', async () => {
    const created: string[] = [];
    render(
      <NameForm
        create={() => Promise.reject(new Error('name taken'))}
        onCreated={(n) => created.push(n)}
      />,
    );
    await userEvent.type(screen.getByLabelText('Name'), 'box');
    await userEvent.click(screen.getByRole('button', { name: 'Create thing' }));
    expect((await screen.findByRole('alert')).textContent).toContain('name taken');
    expect(created).toEqual([]);
    expect((screen.getByLabelText('Name') as HTMLInputElement).value).toBe('box');
  });
});
