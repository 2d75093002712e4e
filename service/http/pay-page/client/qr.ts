/**
 * The QR code of the deposit address: an EIP-681 link (token, chain, recipient, amount) that wallet
 * apps read. Encoded and drawn by `qrcode` (node-qrcode), the most used QR library on npm: it encodes
 * every QR version and error-correction level to the standard, renders SVG in the browser and in Node
 * alike (the tests compare and decode it), has no browser dependencies, and is small once bundled.
 */
import QRCode from "qrcode";

/** Error correction M (15% of the code may be damaged) and a quiet zone of 4 modules, as the standard asks. */
export const QR_OPTIONS = { type: "svg", errorCorrectionLevel: "M", margin: 4 } as const;

/** The SVG markup of `uri`'s QR code. */
export const qrSvg = (uri: string): Promise<string> => QRCode.toString(uri, QR_OPTIONS);

/** The QR code as an SVG element (parsed, never injected as HTML), labelled for screen readers. */
export const qrElement = async (uri: string, label: string): Promise<SVGSVGElement> => {
  const parsed = new DOMParser().parseFromString(await qrSvg(uri), "image/svg+xml");
  const svg = document.importNode(parsed.documentElement, true) as unknown as SVGSVGElement;
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  svg.setAttribute("data-uri", uri);
  return svg;
};
