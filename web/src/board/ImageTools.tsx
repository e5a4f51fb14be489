import { useRef } from 'react';
import { ImageIcon, PdfIcon } from '../ui/icons.js';
import type { BoardImages } from './boardImages.js';

/**
 * The toolbar's Image and PDF buttons (file pickers). On a phone the image
 * picker takes `image/*` without `capture`, so the phone offers its camera
 * beside the gallery: a student photographs their homework and it is on the board.
 */
export function ImageTools({ images, compact, onPdf, busy }: { images: BoardImages; compact: boolean; onPdf?: (f: File) => void; busy?: boolean }) {
  const picker = useRef<HTMLInputElement | null>(null);
  const pdfPicker = useRef<HTMLInputElement | null>(null);
  const take = (input: HTMLInputElement | null, pdf: boolean) => {
    const files = [...(input?.files ?? [])];
    if (input) input.value = '';
    if (files.length) void images.insert(files, undefined, pdf ? onPdf : undefined);
  };
  return (
    <>
      <button className="tool-button" title="Insert an image or a photo" aria-label="Image" data-testid="tool-image" onClick={() => picker.current?.click()}>
        <ImageIcon />
        {!compact && ' Image'}
      </button>
      <input ref={picker} type="file" hidden data-testid="image-input" accept={compact ? 'image/*' : 'image/png,image/jpeg,image/webp,image/gif'} multiple onChange={(e) => take(e.currentTarget, false)} />
      {onPdf && (
        <>
          <button className="tool-button" title="Import a PDF: each page becomes a board page" aria-label="PDF" data-testid="tool-pdf" disabled={busy} onClick={() => pdfPicker.current?.click()}>
            <PdfIcon />
            {!compact && ' PDF'}
          </button>
          <input ref={pdfPicker} type="file" hidden data-testid="pdf-input" accept="application/pdf,.pdf" onChange={(e) => take(e.currentTarget, true)} />
        </>
      )}
    </>
  );
}
