/**
 * "Download notes (PDF)": the board as the partner API exports it, fetched
 * from the gateway with the link token in a header (never in a URL, which
 * proxies and browsers log) and saved through a temporary object URL
 * (docs/board.md, "Notes as a PDF"). The gateway renders it from the board
 * as stored, so what the page has not had acknowledged yet is not in it.
 */
export async function downloadNotes(lessonId: string, token: string, notify: (message: string) => void): Promise<void> {
  notify('Preparing the notes…');
  let res: Response;
  try {
    res = await fetch(`/notes/${encodeURIComponent(lessonId)}`, { headers: { authorization: `Bearer ${token}` } });
  } catch {
    return notify('The notes could not be downloaded: check the connection and try again.');
  }
  if (!res.ok) {
    const body = (await res.json().catch(() => null)) as { detail?: { message?: string } } | null;
    return notify(body?.detail?.message ?? 'The notes could not be downloaded: try again in a moment.');
  }
  const blob = await res.blob();
  const name = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1] ?? 'notes.pdf';
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.style.display = 'none';
  document.body.append(a);
  a.click();
  a.remove();
  // the download has its own copy once it starts
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
