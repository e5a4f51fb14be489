/** Small inline icons (no emoji: many systems, and headless Chromium, have no emoji font). */
const svg = (d: string, props: { title?: string; className?: string }) => (
  <svg className={`icon ${props.className ?? ''}`} viewBox="0 0 24 24" width="16" height="16" fill="none" stroke="currentColor" strokeWidth="2" strokeLinecap="round" strokeLinejoin="round" role={props.title ? 'img' : undefined} aria-hidden={props.title ? undefined : true} aria-label={props.title}>
    {d.split('|').map((p) => <path key={p} d={p} />)}
  </svg>
);
export const TrashIcon = (p: { title?: string }) => svg('M3 6h18|M8 6V4h8v2|M19 6l-1 14H6L5 6|M10 11v6|M14 11v6', p);
export const PinIcon = (p: { title?: string }) => svg('M12 17v5|M9 10.8V4h6v6.8l3 3.2v2H6v-2z|M8 4h8', p);
export const MicIcon = (p: { title?: string; className?: string }) => svg('M12 2a3 3 0 0 0-3 3v7a3 3 0 0 0 6 0V5a3 3 0 0 0-3-3z|M19 10v2a7 7 0 0 1-14 0v-2|M12 19v3', p);
export const CameraIcon = (p: { title?: string; className?: string }) => svg('M23 7l-7 5 7 5z|M3 5h11a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H3a2 2 0 0 1-2-2V7a2 2 0 0 1 2-2z', p);
export const ImageIcon = (p: { title?: string }) => svg('M3 5h18v14H3z|M3 16l5-5 4 4 3-3 6 6|M15.5 8.5h.01', p);
export const PdfIcon = (p: { title?: string }) => svg('M14 2H6v20h12V6z|M14 2v4h4|M8 13h8|M8 17h8|M8 9h2', p);
